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

    /// Runs a change on the driver thread, and writes the jar file (of a default session).
    private func change(_ work: @escaping @Sendable (CookieEngine) -> Void) async {
        await onDriver(
            { engine in
                work(engine)
                engine.persist()
            }, otherwise: ())
    }

    /// Adds (or replaces) a cookie.
    public func set(_ cookie: Cookie) async {
        await change { $0.add(cookie) }
    }

    /// Stores cookies from a `Set-Cookie` header value as if `url` had sent it.
    public func set(setCookieHeader value: String, for url: URL) async {
        await change { $0.add(setCookie: value, for: url) }
    }

    /// Removes a cookie (matched by name, domain and path).
    public func remove(_ cookie: Cookie) async {
        await change { $0.remove(cookie) }
    }

    /// Removes every cookie, from memory and from the jar file.
    public func removeAll() async {
        await change { $0.removeAll() }
    }
}
