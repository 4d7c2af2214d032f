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
    @discardableResult
    private func change(_ work: @escaping @Sendable (CookieEngine) -> Bool) async -> Bool {
        await onDriver(
            { engine in
                let changed = work(engine)
                engine.persist()
                return changed
            }, otherwise: false)
    }

    /// Adds (or replaces) a cookie. Returns false, storing nothing, when a field holds a
    /// control character, or when the cookie is for subdomains of a public suffix (`com`,
    /// `co.uk`) or of part of an IP address.
    @discardableResult
    public func set(_ cookie: Cookie) async -> Bool {
        await change { $0.add(cookie) }
    }

    /// Stores a cookie from a `Set-Cookie` header value as if `url` had sent it, by the rules a
    /// response's cookie meets: a `Domain` must be the URL's host or a parent of it, and not a
    /// public suffix (`Domain=co.uk` is refused); an IP address sets cookies for itself only.
    /// Returns false, storing nothing, when the value is refused or is not a cookie.
    @discardableResult
    public func set(setCookieHeader value: String, for url: URL) async -> Bool {
        await change { $0.add(setCookie: value, for: url) }
    }

    /// Removes a cookie (matched by name, domain and path).
    public func remove(_ cookie: Cookie) async {
        await change {
            $0.remove(cookie)
            return true
        }
    }

    /// Removes every cookie, from memory and from the jar file.
    public func removeAll() async {
        await change {
            $0.removeAll()
            return true
        }
    }
}
