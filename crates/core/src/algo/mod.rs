//! Algorithms, generic over the backend.
