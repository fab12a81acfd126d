-- Demo schema, and the account qcache's binlog tail and schema catalog use.
CREATE TABLE shop.products (id INT PRIMARY KEY, name VARCHAR(64), price INT);
INSERT INTO shop.products VALUES (1, 'apple', 3), (2, 'pear', 4), (3, 'plum', 2),
    (4, 'fig', 7), (5, 'kiwi', 5);
CREATE USER 'qcache'@'%' IDENTIFIED BY 'qcache';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'qcache'@'%';
GRANT SELECT ON *.* TO 'qcache'@'%';
-- The app may run FLUSH/RESET QUERY CACHE and QCACHE INVALIDATE through qcache.
GRANT RELOAD ON *.* TO 'app'@'%';
