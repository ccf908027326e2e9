-- test fixture
CREATE TABLE gap_a (id int);
