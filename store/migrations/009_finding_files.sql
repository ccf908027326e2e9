-- 009: files a finding's report links that cannot be drawn again from the
-- report itself (the differential flame graph of a profiled culprit), so
-- the dashboard on any machine sharing the store serves them (issue 32).
CREATE TABLE finding_files (
	finding_id text NOT NULL REFERENCES findings (id) ON DELETE CASCADE,
	name       text NOT NULL CHECK (name <> '' AND name !~ '[/\\]'),
	data       bytea NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (finding_id, name)
);
