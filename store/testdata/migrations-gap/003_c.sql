-- test fixture: version 2 is missing
CREATE TABLE gap_c (id int);
