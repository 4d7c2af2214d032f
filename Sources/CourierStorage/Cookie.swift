import CourierCore
import Foundation

/// An HTTP cookie as libcurl's cookie engine keeps it.
public struct Cookie: Sendable, Hashable, CustomStringConvertible {
    /// The name.
    public var name: String
    /// The value.
    public var value: String
    /// The domain, without a leading dot.
    public var domain: String
    /// Whether subdomains of `domain` get the cookie too (a `Domain` attribute was given).
    public var includesSubdomains: Bool
    /// The path.
    public var path: String
    /// When it expires; nil for a session cookie (gone when the session ends, never persisted).
    public var expires: Date?
    /// Sent over https only.
    public var isSecure: Bool
    /// Hidden from scripts (kept for completeness; Courier sends it like any other).
    public var isHTTPOnly: Bool

    /// Creates a cookie.
    public init(
        name: String, value: String, domain: String, includesSubdomains: Bool = false, path: String = "/",
        expires: Date? = nil, isSecure: Bool = false, isHTTPOnly: Bool = false
    ) {
        self.name = name
        self.value = value
        self.domain = domain
        self.includesSubdomains = includesSubdomains
        self.path = path
        self.expires = expires
        self.isSecure = isSecure
        self.isHTTPOnly = isHTTPOnly
    }

    /// Whether it lasts only as long as the session.
    public var isSessionCookie: Bool { expires == nil }

    /// `name=value; domain=...; path=...`.
    public var description: String {
        var text = "\(name)=\(value); domain=\(domain); path=\(path)"
        if let expires { text += "; expires=\(expires)" }
        if isSecure { text += "; secure" }
        return text
    }

    /// Whether the cookie goes with a request to `url` (RFC 6265 section 5.4: domain, path,
    /// secure); expiry is the store's business.
    public func matches(_ url: URL) -> Bool {
        guard let host = HostName.of(url) else { return false }
        let cookieDomain = HostName.normalized(domain)
        let domainMatches =
            host == cookieDomain || (includesSubdomains && host.hasSuffix("." + cookieDomain))
        guard domainMatches else { return false }
        let requestPath = url.path.isEmpty ? "/" : url.path
        let pathMatches =
            requestPath == path
            || (requestPath.hasPrefix(path)
                && (path.hasSuffix("/") || requestPath.dropFirst(path.count).hasPrefix("/")))
        guard pathMatches else { return false }
        return !isSecure || url.scheme?.lowercased() == "https"
    }

    /// The `Cookie` header value a request to `url` carries from `cookies` (RFC 6265 section
    /// 5.4): the ones that match it, longer paths first; nil when none match. Expiry is the
    /// store's business.
    package static func requestHeader(for url: URL, from cookies: [Cookie]) -> String? {
        let matching = cookies.filter { $0.matches(url) }.sorted { $0.path.count > $1.path.count }
        guard !matching.isEmpty else { return nil }
        return matching.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    /// Parses a `Set-Cookie` header value as if `url` had sent it (RFC 6265 section 5.2):
    /// without a `Domain` attribute the cookie is for the URL's host only; without a `Path`
    /// attribute its path is the directory of the URL's path; `Max-Age` wins over `Expires`.
    /// Nil when the value has no `name=`, when the name or value holds a control character (as
    /// libcurl refuses them: a tab or line break would also break the cookie file), or when
    /// `Domain` names another site. A `Path` with a control character is ignored.
    package init?(setCookie value: String, for url: URL, now: Date = Date()) {
        guard let host = HostName.of(url) else { return nil }
        let parts = value.split(separator: ";", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard let first = parts.first, let equals = first.firstIndex(of: "="), equals != first.startIndex else {
            return nil
        }
        let name = first[..<equals].trimmingCharacters(in: .whitespaces)
        let content = first[first.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, !Self.hasControl(name), !Self.hasControl(content) else { return nil }
        self.init(name: name, value: content, domain: host, path: Self.defaultPath(of: url))
        var maxAge: Int?
        for attribute in parts.dropFirst() {
            let pieces = attribute.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            let argument = pieces.count == 2 ? pieces[1] : ""
            switch pieces[0].lowercased() {
            case "domain" where !argument.isEmpty:
                let named = HostName.normalized(argument.hasPrefix(".") ? argument.dropFirst() : Substring(argument))
                guard host == named || host.hasSuffix("." + named) else { return nil }
                domain = named
                includesSubdomains = true
            case "path" where argument.hasPrefix("/") && !Self.hasControl(argument): path = argument
            case "max-age": maxAge = Int(argument) ?? maxAge
            case "expires" where maxAge == nil: expires = HTTPDate.parse(argument) ?? expires
            case "secure": isSecure = true
            case "httponly": isHTTPOnly = true
            default: break
            }
        }
        if let maxAge { expires = now.addingTimeInterval(TimeInterval(max(maxAge, -1))) }
        // No later than the cookie file can say (and Int64 seconds can hold).
        if let date = expires, date.timeIntervalSince1970 > Self.latestExpiry {
            expires = Date(timeIntervalSince1970: Self.latestExpiry)
        }
    }

    /// The end of year 9999, in seconds since 1970: the latest expiry kept.
    static let latestExpiry: TimeInterval = 253_402_300_799

    /// Whether `text` has a C0 control character (tab included) or DEL.
    static func hasControl<Text: StringProtocol>(_ text: Text) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// RFC 6265 section 5.1.4: the request path up to, not including, its last `/`.
    private static func defaultPath(of url: URL) -> String {
        let requestPath = url.path
        guard requestPath.hasPrefix("/"), let slash = requestPath.lastIndex(of: "/"), slash != requestPath.startIndex
        else { return "/" }
        return String(requestPath[..<slash])
    }

    // MARK: The Netscape cookie file format libcurl reads and writes

    /// A line of the Netscape cookie file format (what `CURLOPT_COOKIELIST` takes and
    /// `CURLINFO_COOKIELIST` returns): seven tab-separated fields.
    package var netscapeLine: String {
        let seconds = expires.map { Int64(max(1, min($0.timeIntervalSince1970, Self.latestExpiry))) } ?? 0
        let domainField = (isHTTPOnly ? "#HttpOnly_" : "") + (includesSubdomains ? "." : "") + domain
        return [
            domainField, includesSubdomains ? "TRUE" : "FALSE", path, isSecure ? "TRUE" : "FALSE", String(seconds),
            name,
            value,
        ].joined(separator: "\t")
    }

    /// Parses a Netscape cookie file line; nil for comments, blank or malformed lines. The jar
    /// is read back from disk, so it is untrusted: exactly seven tab-separated fields (a
    /// trailing CR is dropped), none with a control character, a domain that is a host name
    /// (not empty, no leading dot after the one that means subdomains, no `#`, no spaces), a
    /// name, and an expiry that is a number. Read byte by byte: a tab, dot or `#` followed by
    /// a combining mark is still that byte.
    package init?(netscapeLine line: Substring) {
        var text = line.utf8[...]
        if text.last == 0x0D { text = text.dropLast() }
        var httpOnly = false
        let httpOnlyPrefix = "#HttpOnly_".utf8
        if text.starts(with: httpOnlyPrefix) {
            httpOnly = true
            text = text.dropFirst(httpOnlyPrefix.count)
        } else if text.first == UInt8(ascii: "#") || text.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
            return nil
        }
        let fields = text.split(separator: 0x09, omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        guard fields.count == 7, !fields.contains(where: { Self.hasControl($0) }),
            let seconds = Int64(fields[4])
        else { return nil }
        var domain = fields[0]
        if domain.utf8.first == UInt8(ascii: ".") { domain = String(domain.unicodeScalars.dropFirst()) }
        guard let start = domain.utf8.first, start != UInt8(ascii: "."), start != UInt8(ascii: "#"),
            !domain.unicodeScalars.contains(where: \.properties.isWhitespace), !fields[5].isEmpty
        else { return nil }
        let expiry = min(TimeInterval(seconds), Self.latestExpiry)
        self.init(
            name: fields[5], value: fields[6], domain: domain, includesSubdomains: fields[1] == "TRUE",
            path: fields[2], expires: seconds == 0 ? nil : Date(timeIntervalSince1970: expiry),
            isSecure: fields[3] == "TRUE", isHTTPOnly: httpOnly)
    }
}

/// Which cookies a session takes from responses.
///
/// Minor releases may add cases: a `switch` over it ends with `default`.
public enum CookieAcceptPolicy: Sendable, Hashable {
    /// Every cookie libcurl's engine accepts (RFC 6265 rules).
    case always
    /// None: responses' cookies are dropped; cookies already stored are still sent.
    case never
    /// Only cookies for exactly the host that answered (no `Domain` attribute for a parent
    /// domain).
    case onlyFromRequestDomain
}
