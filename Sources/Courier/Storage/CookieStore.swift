import Foundation

/// A session's cookies: libcurl's cookie engine, inspected and changed from any context.
///
/// ```swift
/// let all = await api.cookies.all()
/// await api.cookies.set(Cookie(name: "session", value: "abc", domain: "api.example.com"))
/// await api.cookies.removeAll()
/// ```
///
/// Every operation runs on the session's driver thread, between transfers.
public struct CookieStore: Sendable {
    let driver: CurlDriver

    private func onDriver<Value: Sendable>(
        _ work: @escaping @Sendable (CookieEngine) -> Value, otherwise: Value
    ) async -> Value {
        await withCheckedContinuation { continuation in
            let submitted = driver.submit(
                .run { driver in
                    continuation.resume(returning: driver.cookies.map(work) ?? otherwise)
                })
            if !submitted { continuation.resume(returning: otherwise) }
        }
    }

    /// Every cookie that has not expired.
    public func all() async -> [Cookie] {
        await onDriver({ $0.all }, otherwise: [])
    }

    /// The cookies a request to `url` would send.
    public func cookies(for url: URL) async -> [Cookie] {
        await all().filter { $0.matches(url) }
    }

    /// Adds (or replaces) a cookie.
    public func set(_ cookie: Cookie) async {
        await onDriver(
            {
                $0.add(cookie); $0.persist()
            }, otherwise: ())
    }

    /// Stores cookies from a `Set-Cookie` header value as if `url` had sent it.
    public func set(setCookieHeader value: String, for url: URL) async {
        await onDriver(
            {
                $0.add(setCookie: value, for: url); $0.persist()
            }, otherwise: ())
    }

    /// Removes a cookie (matched by name, domain and path).
    public func remove(_ cookie: Cookie) async {
        await onDriver(
            {
                $0.remove(cookie); $0.persist()
            }, otherwise: ())
    }

    /// Removes every cookie, from memory and from the jar file.
    public func removeAll() async {
        await onDriver({ $0.removeAll() }, otherwise: ())
    }
}
