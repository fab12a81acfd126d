//! One client connection and its upstream connection.
