-- 0029_date_recall_path: a round whose recall found turns by the query's date expression alone ("what did I do
-- yesterday?") records recall_path 'date'; before, it read 'window', as if nothing had been recalled.
-- NOT VALID, then VALIDATE: the check is added without holding off writes while the existing rows are read.

ALTER TABLE round_metrics DROP CONSTRAINT IF EXISTS round_metrics_recall_path_check;
ALTER TABLE round_metrics ADD CONSTRAINT round_metrics_recall_path_check
    CHECK (recall_path IN ('fts', 'trgm', 'vector', 'date', 'window', 'summaries_only')) NOT VALID;
ALTER TABLE round_metrics VALIDATE CONSTRAINT round_metrics_recall_path_check;
