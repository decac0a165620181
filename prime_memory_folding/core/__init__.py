"""The structure every layer shares: primes, addresses, records, the structural index,
scopes, times, words, and a read's gates (:class:`~.filters.Filters`)."""
