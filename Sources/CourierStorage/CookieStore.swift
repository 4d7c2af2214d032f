import Foundation

/// A session's cookies: libcurl's cookie engine, inspected and changed from any context.
///
/// ```swift
/// let all = await api.cookies.all()
/// await api.cookies.set(Cookie(name: "session", value: "abc", domain: "api.example.com"))
/// await api.cookies.removeAll()
/// ```
///
/// Every operation runs where the session's transport keeps its cookies (for the libcurl
/// engine: on its thread, between transfers).
public struct CookieStore: Sendable {
    package let host: any CookieJarHost

    /// A store over the cookie jar that `host` keeps.
    package init(host: any CookieJarHost) {
        self.host = host
    }

    private func onEngine<Value: Sendable>(
        _ work: @escaping @Sendable (any CookieJar) -> Value, otherwise: Value
    ) async -> Value {
        await host.withCookieJar({ jar in jar.map(work) ?? otherwise })
    }

    /// Every cookie that has not expired.
    public func all() async -> [Cookie] {
        await onEngine({ $0.all }, otherwise: [])
    }

    /// The cookies a request to `url` would send.
    public func cookies(for url: URL) async -> [Cookie] {
        await all().filter { $0.matches(url) }
    }

    /// Runs a change on the engine thread, and writes the jar file (of a default session).
    @discardableResult
    private func change(_ work: @escaping @Sendable (any CookieJar) -> Bool) async -> Bool {
        await onEngine(
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

/// A transport's cookie jar (for the libcurl engine, its cookie engine), touched only by work
/// that ``CookieJarHost/withCookieJar(_:)`` runs.
package protocol CookieJar: AnyObject {
    /// Every cookie that has not expired.
    var all: [Cookie] { get }
    /// Adds or replaces `cookie`; false when it is refused.
    func add(_ cookie: Cookie) -> Bool
    /// Stores a `Set-Cookie` value as if `url` had sent it; false when it is refused.
    func add(setCookie value: String, for url: URL) -> Bool
    /// Removes the cookie with the name, domain and path of `cookie`.
    func remove(_ cookie: Cookie)
    /// Removes every cookie.
    func removeAll()
    /// Writes the jar file, if the session has one.
    func persist()
    /// The `Cookie` header a request to `url` would carry; nil when no cookie goes with it.
    /// Any thread.
    func requestHeader(for url: URL) -> String?
}

/// Whoever owns a cookie jar: runs work with it where it may be touched.
package protocol CookieJarHost: Sendable {
    /// Runs `work` with the jar (nil when the session keeps no cookies, or is shut down) and
    /// returns its result.
    func withCookieJar<Value: Sendable>(_ work: @escaping @Sendable ((any CookieJar)?) -> Value) async -> Value
    /// The `Cookie` header the host's transfers add to a request to `urlString` (nil when none,
    /// or when it keeps no cookies), as the HTTP cache must see the request (`Vary: Cookie`).
    /// Synchronous, any thread; while the jar has never held a cookie it does not even parse
    /// the URL.
    func cookieHeader(for urlString: String) -> String?
}
