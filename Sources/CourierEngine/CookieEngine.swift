import CCurlShim
@_spi(CourierInternals) import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import Logging
import Synchronization

/// libcurl's cookie engine for one session: a share handle (`CURL_LOCK_DATA_COOKIE`, with TLS
/// sessions and DNS answers) that the easy handles of the session's transfers that handle
/// cookies attach to, on whichever engine they run, and a utility easy handle for reading and
/// changing the cookies. libcurl takes the share's locks (a pthread mutex per kind of data);
/// `gate` makes each use of the utility handle, from any thread, one at a time.
///
/// A default session keeps cookies that have an expiry in `cookies.txt` under its storage
/// directory (the Netscape format libcurl reads), rewritten atomically whenever responses or
/// the `CookieStore` change them; session cookies are never written. The file is not trusted:
/// it is read line by line, and a line that is not a well-formed cookie (seven tab-separated
/// fields, a numeric expiry, a host name for the domain, a path starting with `/`, no control
/// characters, nothing a `Cookie` header could not carry) is dropped, and the count logged.
package final class CookieEngine: @unchecked Sendable {
    let share: UnsafeMutableRawPointer
    private let utility: UnsafeMutableRawPointer
    private let locks = ShareLocks()
    /// Held by every method that uses `utility` (recursive: `persist` reads `all`), and by
    /// `close`, which waits for them.
    private let gate = NSRecursiveLock()
    /// Closed: the handles are gone, and every method does nothing (guarded by `gate`).
    private var closed = false
    private let jar: URL?
    /// The jar's text as this engine last wrote (or read) it.
    private var lastWritten: String?
    private let policy: CookieAcceptPolicy
    /// Whether a cookie may be in the jar: set by every store and by every response head with
    /// `Set-Cookie` (libcurl stores those itself), cleared by `removeAll`. While it is false, a
    /// request's `Cookie` header is known to be empty without reading the jar.
    private let mayHoldCookies = Atomic<Bool>(false)

    private let logger: Logger?

    init(jar: URL?, policy: CookieAcceptPolicy, logger: Logger? = nil) {
        self.jar = jar
        self.logger = logger
        self.policy = policy
        share = CurlRuntime.handle(curl_share_init)!
        locks.install(on: share)
        courier_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_COOKIE.rawValue))
        // An easy handle has one share: the TLS session cache and DNS cache of the transfers
        // that handle cookies are this one's (see `SessionShares.connections`).
        courier_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        courier_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        utility = CurlRuntime.handle(curl_easy_init)!
        courier_easy_setopt_share(utility, share)
        courier_easy_setopt_string(utility, CURLOPT_COOKIEFILE, "")
        load()
    }

    /// Releases the handles (after every easy handle has left the share). Every change was
    /// written when it happened; writing again here could replace a newer jar that another
    /// session wrote since.
    func close() {
        gate.withLock {
            closed = true
            curl_easy_cleanup(utility)
            curl_share_cleanup(share)
            locks.release()
        }
    }

    /// Turns cookie handling on for a transfer's easy handle.
    func attach(_ easy: UnsafeMutableRawPointer) {
        courier_easy_setopt_share(easy, share)
        courier_easy_setopt_string(easy, CURLOPT_COOKIEFILE, "")
    }

    // MARK: Reading and changing

    package var all: [Cookie] {
        gate.lock()
        defer { gate.unlock() }
        guard !closed else { return [] }
        var list: UnsafeMutablePointer<curl_slist>?
        guard courier_easy_getinfo_slist(utility, CURLINFO_COOKIELIST, &list) == CURLE_OK else { return [] }
        defer { curl_slist_free_all(list) }
        var cookies: [Cookie] = []
        var node = list
        while let current = node {
            if let data = current.pointee.data, let cookie = Cookie(netscapeLine: Substring(String(cString: data))) {
                cookies.append(cookie)
            }
            node = current.pointee.next
        }
        let now = Date()
        return cookies.filter { ($0.expires ?? .distantFuture) > now }
    }

    /// Stores a cookie handed over by the API (or read from the jar). Refused (false) when the
    /// cookie-file line libcurl is given for it would not read back as that cookie (a control
    /// character in a field, a domain that is not a host name), or when its domain with
    /// subdomains is a public suffix or part of an IP address.
    @discardableResult
    package func add(_ cookie: Cookie) -> Bool {
        guard Self.isStorable(cookie) else { return false }
        if cookie.includesSubdomains && !CookieDomain.mayHoldCookiesForSubdomains(cookie.domain) { return false }
        store(cookie)
        return true
    }

    private func store(_ cookie: Cookie) {
        mayHoldCookies.store(true, ordering: .releasing)
        gate.withLock {
            guard !closed else { return }
            courier_easy_setopt_string(utility, CURLOPT_COOKIELIST, cookie.netscapeLine)
        }
    }

    /// Whether the cookie-file line libcurl is given for `cookie` reads back as one cookie:
    /// no control character in a field, a domain that is a host name, a name.
    private static func isStorable(_ cookie: Cookie) -> Bool {
        Cookie(netscapeLine: Substring(cookie.netscapeLine)) != nil
    }

    /// Stores a `Set-Cookie` value as if `url` had sent it. libcurl's own `Set-Cookie:` form of
    /// `CURLOPT_COOKIELIST` knows no request host, so the value is parsed here, its domain
    /// checked as libcurl checks a response's (the public suffix list; an IP address sets
    /// cookies for itself only), and handed over as a cookie-file line. Returns whether the
    /// value was stored.
    @discardableResult
    package func add(setCookie value: String, for url: URL) -> Bool {
        guard let cookie = Cookie(setCookie: value, for: url), let host = url.host else { return false }
        if cookie.includesSubdomains && !CookieDomain.host(host, maySetCookiesFor: cookie.domain) { return false }
        guard Self.isStorable(cookie) else { return false }
        store(cookie)
        return true
    }

    package func remove(_ cookie: Cookie) {
        var expired = cookie
        expired.expires = Date(timeIntervalSince1970: 1)
        store(expired)
    }

    package func removeAll() {
        gate.withLock {
            guard !closed else { return }
            courier_easy_setopt_string(utility, CURLOPT_COOKIELIST, "ALL")
            mayHoldCookies.store(false, ordering: .releasing)
        }
    }

    /// A response head with `Set-Cookie` arrived for a transfer that handles cookies: libcurl
    /// may have stored one. Engine thread; an atomic store.
    func responseMaySetCookies() {
        mayHoldCookies.store(true, ordering: .releasing)
    }

    /// The `Cookie` header a request to `url` carries (see `Cookie.requestHeader`); nil without
    /// reading the jar while no cookie was ever stored.
    package func requestHeader(for url: URL) -> String? {
        guard mayHoldCookies.load(ordering: .acquiring) else { return nil }
        return Cookie.requestHeader(for: url, from: all)
    }

    /// The same for a URL as a transfer holds it, in text: parsed only when the jar may hold a
    /// cookie (a request path with an empty jar parses nothing).
    func requestHeader(for urlString: String) -> String? {
        guard mayHoldCookies.load(ordering: .acquiring), let url = URL(string: urlString) else { return nil }
        return Cookie.requestHeader(for: url, from: all)
    }

    // MARK: After a response

    /// Applies the accept policy to the cookies a response from `url` just set, then saves
    /// them. libcurl has already stored them by the time the response is over; the ones the
    /// policy refuses are taken out again.
    func responseSetCookies(_ values: [String], from url: URL) {
        guard !values.isEmpty else { return }
        gate.lock()
        defer { gate.unlock() }
        if policy != .always {
            let host = HostName.of(url) ?? ""
            for value in values {
                guard let parsed = Cookie(setCookie: value, for: url) else { continue }
                guard policy == .never || parsed.domain != host else { continue }
                for cookie in all where cookie.name == parsed.name && cookie.domain == parsed.domain {
                    remove(cookie)
                }
            }
        }
        persist()
    }

    /// Stores the cookies of a response libcurl did not read itself (a WebSocket's handshake),
    /// then applies the accept policy and saves them as after any response.
    func storeSetCookies(_ values: [String], from url: URL) {
        for value in values { add(setCookie: value, for: url) }
        responseSetCookies(values, from: url)
    }

    // MARK: The jar file

    /// The largest jar file read (far more than any browser keeps).
    static let jarLimit = 16 << 20

    private func load() {
        guard let jar,
            let size = (try? FileManager.default.attributesOfItem(atPath: jar.path))?[.size] as? Int
        else { return }
        guard size <= Self.jarLimit else {
            logger?.warning("Ignored the cookie jar \(jar.path): \(size) bytes is more than a jar holds")
            return
        }
        guard let data = try? Data(contentsOf: jar) else { return }
        var dropped = 0
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true) {
            let trimmed = line.hasSuffix("\r") ? line.dropLast() : line
            if trimmed.trimmingCharacters(in: .whitespaces).isEmpty
                || (trimmed.hasPrefix("#") && !trimmed.hasPrefix("#HttpOnly_"))
            {
                continue  // blank lines and comments
            }
            guard let cookie = Cookie(netscapeLine: trimmed), Self.isWellFormed(cookie) else {
                dropped += 1
                continue
            }
            // `add` refuses what a response could not have set (a domain cookie for a public
            // suffix, a line that does not read back).
            if !cookie.isSessionCookie, !add(cookie) { dropped += 1 }
        }
        if dropped > 0 {
            logger?.warning("Dropped \(dropped) malformed line(s) of the cookie jar \(jar.path)")
        }
    }

    /// Whether a cookie read from the jar is one a server could have set: a domain of host-name
    /// characters, a path starting with `/`, a name and value without control characters or
    /// `;` (which would end them in a `Cookie` header), a name without `=` or white space.
    static func isWellFormed(_ cookie: Cookie) -> Bool {
        func plain(_ text: String, refusing refused: String) -> Bool {
            text.unicodeScalars.allSatisfy {
                $0.value >= 0x20 && $0.value != 0x7F && !refused.unicodeScalars.contains($0)
            }
        }
        let domainOK = cookie.domain.unicodeScalars.allSatisfy {
            $0.isASCII && (CharacterSet.alphanumerics.contains($0) || ".-_:[]".unicodeScalars.contains($0))
        }
        return domainOK && cookie.path.hasPrefix("/") && plain(cookie.path, refusing: ";")
            && plain(cookie.name, refusing: "; =") && plain(cookie.value, refusing: ";")
    }

    /// Writes the persistent cookies when they changed since the last write: to a temporary
    /// file, renamed over the jar. On the engine thread that finished the response, so that a
    /// response's cookies are on disk before its caller hears of it (a program may exit right
    /// after); a page-cache write of a few kilobytes, and only when persistent cookies changed.
    package func persist() {
        guard let jar else { return }
        gate.lock()
        defer { gate.unlock() }
        guard !closed else { return }
        let lines = all.filter { !$0.isSessionCookie }.map(\.netscapeLine)
        let text = "# Netscape HTTP Cookie File, written by Courier\n" + lines.map { $0 + "\n" }.joined()
        guard text != lastWritten else { return }
        do {
            try AtomicFile.replace(jar, with: Data(text.utf8), createsDirectory: true)
            lastWritten = text
        } catch {
            // Best effort: the cookies stay in memory; the next change writes them again.
        }
    }
}
