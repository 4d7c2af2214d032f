@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Synchronization

/// The hosts that asked, through `Strict-Transport-Security` (RFC 6797), to be reached over
/// https only, until when, and whether their subdomains too.
///
/// Kept in a JSON file in default sessions (written whole, atomically, on each change: a host's
/// policy survives a crash right after it was set), in memory otherwise. Hosts are kept and
/// looked up normalized (``HostName``: lower case, no trailing dot, IDNA in ASCII), so that no
/// other spelling of a noted host goes out in clear; IP addresses are never noted (RFC 6797
/// section 8.1.1).
package final class HSTSStore: Sendable {
    struct Entry: Codable, Equatable {
        var expires: Date
        var includesSubdomains: Bool
    }

    private let entries: Locked<[String: Entry]>
    /// Whether any entry exists: the request path reads this, not the lock.
    private let populated = Atomic<Bool>(false)
    private let file: URL?

    /// A store kept in `file` (read now; a missing or unreadable file is an empty store), or
    /// in memory when `file` is nil.
    package init(file: URL?) {
        self.file = file
        var loaded: [String: Entry] = [:]
        if let file, let data = try? Data(contentsOf: file),
            let decoded = try? JSONDecoder().decode([String: Entry].self, from: data)
        {
            let now = Date()
            for (host, entry) in decoded where entry.expires > now {
                let host = HostName.normalized(host)
                if !host.isEmpty, !Self.isIPAddress(host) { loaded[host] = entry }
            }
        }
        entries = Locked(loaded)
        populated.store(!loaded.isEmpty, ordering: .relaxed)
    }

    /// Whether the store knows no host: one atomic load, so callers can skip building a URL
    /// for ``upgrade(_:)`` on the common path.
    package var isEmpty: Bool { !populated.load(ordering: .relaxed) }

    /// `url` with https instead of http (and port 443 for an explicit 80; another explicit port
    /// stays, as RFC 6797 section 8.3 says) when its host is known; nil otherwise.
    package func upgrade(_ url: URL) -> URL? {
        guard populated.load(ordering: .relaxed), url.scheme?.lowercased() == "http",
            let host = HostName.of(url), !Self.isIPAddress(host), policy(for: host)
        else { return nil }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
        components.scheme = "https"
        if components.port == 80 { components.port = nil }
        return components.url
    }

    /// Whether `host` or a parent domain that includes subdomains has a policy in force.
    private func policy(for host: String) -> Bool {
        let now = Date()
        return entries.withLock { entries in
            if let entry = entries[host], entry.expires > now { return true }
            var domain = Substring(host)
            while let dot = domain.firstIndex(of: ".") {
                domain = domain[domain.index(after: dot)...]
                if let entry = entries[String(domain)], entry.includesSubdomains, entry.expires > now { return true }
            }
            return false
        }
    }

    /// Notes the `Strict-Transport-Security` value `header` of a response from `host` that
    /// came over a verified https connection. `max-age=0` removes the host; a header without a
    /// valid `max-age` is ignored (RFC 6797 section 6.1).
    package func record(_ header: String, host rawHost: String) {
        let host = HostName.normalized(rawHost)
        guard !host.isEmpty, !Self.isIPAddress(host), let policy = Self.parse(header) else { return }
        entries.withLock { entries in
            let before = entries[host]
            if policy.maxAge == 0 {
                entries[host] = nil
            } else {
                let expires = Date(timeIntervalSinceNow: TimeInterval(min(policy.maxAge, 1 << 40)))
                entries[host] = Entry(expires: expires, includesSubdomains: policy.includesSubdomains)
            }
            populated.store(!entries.isEmpty, ordering: .relaxed)
            // The file is written when a host comes or goes or changes its subdomain choice,
            // not for the same header on every response (that only moves the expiry, here in
            // memory). Under the lock: writes stay in order.
            guard let file,
                (before == nil) != (entries[host] == nil)
                    || before?.includesSubdomains != entries[host]?.includesSubdomains,
                let data = try? JSONEncoder().encode(entries)
            else { return }
            try? AtomicFile.replace(file, with: data, createsDirectory: true)
        }
    }

    /// Notes the policy a response to `request` carries, if it came over https.
    package static func note(_ head: ResponseHead, of request: HTTPRequest, in store: HSTSStore) {
        guard request.scheme == "https", let value = head.lastValue(of: .strictTransportSecurity),
            let host = request.url?.host
        else { return }
        store.record(value, host: host)
    }

    /// The same, for a response already parsed (a redirect).
    package static func note(_ response: HTTPResponse, of request: HTTPRequest, in store: HSTSStore) {
        guard request.scheme == "https", let value = response.headerFields[.strictTransportSecurity],
            let host = request.url?.host
        else { return }
        store.record(value, host: host)
    }

    /// `max-age` and `includeSubDomains` (case-insensitive directive names, quoted or bare
    /// values); nil without a valid `max-age` or with a directive given twice.
    static func parse(_ header: String) -> (maxAge: Int64, includesSubdomains: Bool)? {
        var maxAge: Int64?
        var includesSubdomains = false
        var seen: Set<String> = []
        for directive in header.split(separator: ";") {
            let parts = directive.split(separator: "=", maxSplits: 1)
            let name = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
            guard !name.isEmpty else { continue }
            guard seen.insert(name).inserted else { return nil }
            let value = parts.count == 2 ? parts[1].trimmingCharacters(in: .whitespaces) : nil
            switch name {
            case "max-age":
                guard var text = value else { return nil }
                if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") {
                    text = String(text.dropFirst().dropLast())
                }
                guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
                maxAge = Int64(text) ?? Int64.max
            case "includesubdomains":
                includesSubdomains = true
            default:
                break
            }
        }
        return maxAge.map { ($0, includesSubdomains) }
    }

    /// IPv4 dotted quads and anything with a colon (IPv6, bracketed or not).
    static func isIPAddress(_ host: String) -> Bool {
        if host.contains(":") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) && UInt8($0) != nil }
    }
}
