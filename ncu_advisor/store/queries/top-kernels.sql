-- Kernels ranked by their GPU time summed over every report in the store (or the reports
-- carrying a label, e.g. branch=main).
-- param limit = 20: how many kernels to list
-- param label_key = : only reports with this label ('' = every report)
-- param label_value = : ... and this value of it
WITH picked AS (
    SELECT l.*
    FROM launches AS l
    JOIN reports AS r USING (report_id)
    WHERE $label_key = '' OR r.labels[$label_key] = $label_value
)
SELECT
    short_name AS kernel,
    count(DISTINCT report_id) AS reports,
    sum(invocations)::BIGINT AS launches,
    sum(duration_ns * invocations) AS total_ns,
    sum(duration_ns * invocations) / sum(invocations) AS mean_ns,
    100 * sum(duration_ns * invocations)
        / (SELECT sum(duration_ns * invocations) FROM picked) AS share_pct
FROM picked
GROUP BY short_name
ORDER BY total_ns DESC, kernel
LIMIT $limit
