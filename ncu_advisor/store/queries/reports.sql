-- The reports in the store, oldest first: where each came from, its GPU, labels and totals.
SELECT
    r.report_id,
    coalesce(r.captured_at, r.ingested_at) AS report_time,
    r.source,
    r.gpu,
    r.launch_count AS launches,
    r.total_duration_ns AS total_ns,
    r.finding_count AS findings,
    (SELECT string_agg(key || '=' || value, ' ' ORDER BY key)
     FROM report_labels AS rl WHERE rl.report_id = r.report_id) AS labels
FROM reports AS r
ORDER BY report_time, r.report_id
