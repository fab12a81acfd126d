//! Policy: statements that change what a user may read (GRANT, REVOKE, roles, user changes,
//! writes to the privilege tables) and how far their invalidation must reach.
