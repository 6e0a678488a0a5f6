-- A kernel's (or the whole run's) GPU time and key quantities in each report, in order: by a
-- label's value (numerically when it is a number), then by capture (else ingest) time.
-- Percentages are averages weighted by each launch's time. Used by `ncu-advise trend`.
-- param kernel = .: regular expression searched in the kernels' full names ('.' = every kernel)
-- param label = : the label to show and order by; reports without it are left out ('' = order by time)
WITH picked AS (
    SELECT report_id, launch, short_name, invocations, duration_ns * invocations AS time_ns
    FROM launches
    WHERE regexp_matches(name, $kernel)
),
per_report AS (
    SELECT
        p.report_id,
        sum(p.invocations)::BIGINT AS launches,
        count(DISTINCT p.short_name) AS kernels,
        sum(p.time_ns) AS total_ns,
        sum(q.dram_pct * p.time_ns)
            / nullif(sum(CASE WHEN q.dram_pct IS NOT NULL THEN p.time_ns END), 0) AS dram_pct,
        sum(q.sm_pct * p.time_ns)
            / nullif(sum(CASE WHEN q.sm_pct IS NOT NULL THEN p.time_ns END), 0) AS sm_pct,
        sum(q.achieved_occupancy_pct * p.time_ns)
            / nullif(sum(CASE WHEN q.achieved_occupancy_pct IS NOT NULL THEN p.time_ns END), 0)
            AS achieved_occupancy_pct,
        sum(q.dram_bytes * p.invocations) AS dram_bytes
    FROM picked AS p
    LEFT JOIN quantities AS q USING (report_id, launch)
    GROUP BY p.report_id
),
-- Every finding of the run (application-level ones too: ingest counts them) when no kernel is
-- picked; for a kernel, the findings on its launches.
found AS (
    SELECT f.report_id, count(*) AS findings
    FROM findings AS f
    WHERE $kernel = '.' OR EXISTS (
        SELECT 1 FROM picked AS p WHERE p.report_id = f.report_id AND p.launch = f.launch)
    GROUP BY f.report_id
)
SELECT
    r.report_id,
    r.labels[$label] AS label_value,
    coalesce(r.captured_at, r.ingested_at) AS report_time,
    pr.launches,
    pr.kernels,
    pr.total_ns,
    pr.dram_pct,
    pr.sm_pct,
    pr.achieved_occupancy_pct,
    pr.dram_bytes,
    coalesce(found.findings, 0) AS findings
FROM reports AS r
JOIN per_report AS pr USING (report_id)
LEFT JOIN found USING (report_id)
WHERE $label = '' OR r.labels[$label] IS NOT NULL
ORDER BY try_cast(label_value AS DOUBLE) NULLS LAST, label_value NULLS LAST, report_time, r.report_id
