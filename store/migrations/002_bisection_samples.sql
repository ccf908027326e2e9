-- 002: samples taken by a bisection name it, so "what did bisection X
-- measure" is one query and a report can find the machine it ran on.
ALTER TABLE samples ADD COLUMN bisection_id text;
CREATE INDEX samples_bisection ON samples (bisection_id, commit) WHERE bisection_id IS NOT NULL;
