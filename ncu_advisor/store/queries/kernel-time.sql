-- One kernel's GPU time in each report, ordered by a label's value (numerically when it is a
-- number), then by capture (else ingest) time.
-- param kernel: regular expression searched in the kernel's full (demangled) name
-- param label = : the label to show and order by; reports without it are left out ('' = order by time)
WITH picked AS (
    SELECT report_id, invocations, duration_ns
    FROM launches
    WHERE regexp_matches(name, $kernel)
),
per_report AS (
    SELECT
        report_id,
        sum(invocations)::BIGINT AS launches,
        sum(duration_ns * invocations) AS total_ns,
        sum(duration_ns * invocations) / sum(invocations) AS mean_ns,
        min(duration_ns) AS min_ns,
        max(duration_ns) AS max_ns
    FROM picked
    GROUP BY report_id
)
SELECT
    r.report_id,
    r.labels[$label] AS label_value,
    coalesce(r.captured_at, r.ingested_at) AS report_time,
    p.launches,
    p.total_ns,
    p.mean_ns,
    p.min_ns,
    p.max_ns
FROM per_report AS p
JOIN reports AS r USING (report_id)
WHERE $label = '' OR r.labels[$label] IS NOT NULL
ORDER BY try_cast(label_value AS DOUBLE) NULLS LAST, label_value NULLS LAST, report_time,
    r.report_id
