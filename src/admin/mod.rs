//! Operator surfaces: metrics, health endpoints and the admin statements qcache answers.
