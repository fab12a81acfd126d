//! Policy: what the statements after a hit (SHOW WARNINGS, FOUND_ROWS(), ROW_COUNT(), …)
//! must answer, since the server did not run the SELECT that was served.
