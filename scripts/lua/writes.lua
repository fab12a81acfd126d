-- One kind of write per run (--kind), for scripts/bench-writes: the latency a write pays
-- through a target, kind by kind. Tables: w_parent (PK, a pinned column `grp`, a counter),
-- w_child (FK to w_parent, a secondary index `k`). A read that pins w_parent.grp and joins
-- w_child is what makes qcache keep derived slices of w_child (docs/design.md), so its child
-- writes take the parent lookup it does for them.

sysbench.cmdline.options = {
  kind = {"update_pk | update_secondary | insert_child | insert_delete | txn_two_updates", "update_pk"},
  rows = {"w_parent rows", 10000},
}

function prepare()
  local con = sysbench.sql.driver():connect()
  con:query("DROP TABLE IF EXISTS w_child")
  con:query("DROP TABLE IF EXISTS w_parent")
  con:query([[CREATE TABLE w_parent (id INT PRIMARY KEY, grp INT NOT NULL, n INT NOT NULL,
    KEY (grp)) ENGINE=InnoDB]])
  con:query([[CREATE TABLE w_child (id INT AUTO_INCREMENT PRIMARY KEY, parent_id INT NOT NULL,
    k INT NOT NULL, amount INT NOT NULL, KEY (k),
    FOREIGN KEY (parent_id) REFERENCES w_parent (id)) ENGINE=InnoDB]])
  local n = sysbench.opt.rows
  local batch = {}
  for i = 1, n do
    batch[#batch + 1] = string.format("(%d, %d, 0)", i, i % 100)
    if #batch == 1000 or i == n then
      con:query("INSERT INTO w_parent VALUES " .. table.concat(batch, ","))
      batch = {}
    end
  end
  for i = 1, n do
    batch[#batch + 1] = string.format("(%d, %d, 0)", i, i)
    if #batch == 1000 or i == n then
      con:query("INSERT INTO w_child (parent_id, k, amount) VALUES " .. table.concat(batch, ","))
      batch = {}
    end
  end
end

function cleanup()
  local con = sysbench.sql.driver():connect()
  con:query("DROP TABLE IF EXISTS w_child")
  con:query("DROP TABLE IF EXISTS w_parent")
end

function thread_init()
  con = sysbench.sql.driver():connect()
  -- The read that makes w_child's slices derived from w_parent.grp (cached through qcache).
  con:query("SELECT COUNT(*), SUM(c.amount) FROM w_parent p JOIN w_child c ON c.parent_id = p.id WHERE p.grp = 7")
end

function thread_done()
  con:disconnect()
end

local function rnd()
  return sysbench.rand.uniform(1, sysbench.opt.rows)
end

function event()
  local kind = sysbench.opt.kind
  if kind == "update_pk" then
    con:query(string.format("UPDATE w_parent SET n = n + 1 WHERE id = %d", rnd()))
  elseif kind == "update_secondary" then
    con:query(string.format("UPDATE w_child SET amount = amount + 1 WHERE k = %d", rnd()))
  elseif kind == "insert_child" then
    con:query(string.format("INSERT INTO w_child (parent_id, k, amount) VALUES (%d, %d, 1)",
      rnd(), rnd()))
  elseif kind == "insert_delete" then
    con:query(string.format("INSERT INTO w_child (parent_id, k, amount) VALUES (%d, 0, 0)", rnd()))
    con:query("DELETE FROM w_child WHERE id = LAST_INSERT_ID()")
  elseif kind == "txn_two_updates" then
    con:query("BEGIN")
    con:query(string.format("UPDATE w_parent SET n = n + 1 WHERE id = %d", rnd()))
    con:query(string.format("UPDATE w_child SET amount = amount + 1 WHERE k = %d", rnd()))
    con:query("COMMIT")
  else
    error("unknown --kind " .. kind)
  end
end
