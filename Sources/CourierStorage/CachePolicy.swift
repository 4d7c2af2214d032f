/// How a request uses the session's HTTP cache (URLRequest's policies, plus a fallback).
///
/// Minor releases may add cases: a `switch` over it ends with `default`.
public enum CachePolicy: Sendable, Hashable {
    /// RFC 9111: a fresh stored response is used as is; a stale one with a validator is
    /// revalidated (`If-None-Match`, `If-Modified-Since`) and reused on 304. The default.
    case useProtocolCachePolicy
    /// Always load; the response is still stored.
    case reloadIgnoringCacheData
    /// A stored response, fresh or stale; load only when there is none.
    case returnCacheDataElseLoad
    /// A stored response, fresh or stale; never load (`CourierError.notCached` when there is none).
    case returnCacheDataDontLoad
    /// As `useProtocolCachePolicy`, but when the load fails (no connection, a timeout), a
    /// stored response is returned instead, stale or not (unless it said `must-revalidate`).
    case returnCacheDataOnError
}
