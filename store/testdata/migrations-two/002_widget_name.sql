-- test fixture
ALTER TABLE widgets ADD COLUMN name text NOT NULL DEFAULT '';
