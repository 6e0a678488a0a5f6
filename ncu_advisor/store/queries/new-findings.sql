-- Findings (a rule on a kernel) seen in reports newer than a given report but not in that
-- report: what appeared since. "Newer" is by capture time, else ingest time.
-- param since: the report_id to compare against (the reports query lists them)
WITH base AS (
    SELECT coalesce(captured_at, ingested_at) AS report_time FROM reports WHERE report_id = $since
),
before AS (
    SELECT DISTINCT rule, coalesce(short_name, '(application)') AS kernel
    FROM findings
    WHERE report_id = $since
),
later AS (
    SELECT f.*, coalesce(f.short_name, '(application)') AS kernel,
           coalesce(r.captured_at, r.ingested_at) AS report_time
    FROM findings AS f
    JOIN reports AS r USING (report_id)
    WHERE coalesce(r.captured_at, r.ingested_at) > (SELECT report_time FROM base)
)
SELECT
    later.rule,
    later.kernel,
    arg_min(later.severity, CASE later.severity WHEN 'high' THEN 0 WHEN 'medium' THEN 1
                                                WHEN 'low' THEN 2 ELSE 3 END) AS severity,
    arg_min(later.title, later.report_time) AS title,
    arg_min(later.report_id, later.report_time) AS first_report,
    min(later.report_time) AS first_seen,
    count(DISTINCT later.report_id) AS reports,
    max(later.estimated_saving_ns) AS max_saving_ns
FROM later
ANTI JOIN before USING (rule, kernel)
GROUP BY later.rule, later.kernel
ORDER BY first_seen, later.rule, later.kernel
