-- test fixture
CREATE TABLE widgets (id int PRIMARY KEY);
