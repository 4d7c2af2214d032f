import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes

/// Turns a path and headers into a validated request head. Pure functions: every check here
/// runs before anything is sent.
package enum RequestBuilding {
    /// The base URL with a trailing slash added to a non-empty path that lacks one, so that
    /// relative paths resolve below it (AFHTTPSessionManager's rule).
    package static func normalizedBaseURL(_ url: URL?) -> URL? {
        guard let url else { return nil }
        // `URL.path` drops a trailing slash; the percent-encoded path keeps it.
        let path = url.path(percentEncoded: true)
        guard !path.isEmpty, !path.hasSuffix("/") else { return url }
        var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        components?.percentEncodedPath = path + "/"
        return components?.url ?? url
    }

    /// Resolves `path` against `baseURL` as `URL(string:relativeTo:)` does and checks that the
    /// result is an absolute http(s) URL with a host.
    package static func resolve(_ path: String, against baseURL: URL?) throws(CourierError) -> URL {
        guard !path.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .invalidURL(.init(message: "The URL '\(path.debugDescription)' contains control characters"))
        }
        guard let url = URL(string: path, relativeTo: baseURL)?.absoluteURL else {
            throw .invalidURL(
                .init(message: "'\(path)' is not a valid URL" + (baseURL.map { " relative to \($0)" } ?? "")))
        }
        try validate(url)
        return url
    }

    /// The user name and password written into `url` (`https://user:password@host/`), as a
    /// credential sent with Basic authentication up front, as curl does; nil when it has none.
    package static func credential(in url: URL) -> Credential? {
        guard let user = url.user(percentEncoded: false) else { return nil }
        return Credential(
            user: user, password: url.password(percentEncoded: false) ?? "", persistence: .none,
            sendsPreemptively: true)
    }

    /// Checks scheme and host.
    static func validate(_ url: URL) throws(CourierError) {
        guard let scheme = url.scheme?.lowercased() else {
            throw .invalidURL(.init(url: url, message: "The URL has no scheme; give an absolute URL or a base URL"))
        }
        guard scheme == "http" || scheme == "https" else {
            throw .unsupportedScheme(.init(url: url, message: "Only http and https URLs are supported, not \(scheme)"))
        }
        guard let host = url.host, !host.isEmpty else {
            throw .invalidURL(.init(url: url, message: "The URL has no host"))
        }
    }

    /// Sets each header on `fields` (replacing earlier values of the same name), refusing names
    /// that are not RFC 9110 tokens and values with CR, LF or NUL.
    package static func apply(_ headers: [String: String], to fields: inout HTTPFields) throws(CourierError) {
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            guard let fieldName = HTTPField.Name(name) else {
                throw .invalidHeader(.init(message: "'\(name.debugDescription)' is not a valid header name"))
            }
            guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) else {
                throw .invalidHeader(
                    .init(message: "The value of header '\(name)' contains CR, LF or NUL: \(value.debugDescription)"))
            }
            fields[fieldName] = value
        }
    }

    /// Puts `given` into `fields`: each name in `given` replaces the fields of that name, and
    /// repeated names keep their order. `Content-Length` and `Transfer-Encoding` are left out:
    /// the transport frames the body it sends.
    package static func apply(_ given: HTTPFields, to fields: inout HTTPFields) {
        var replaced: Set<HTTPField.Name> = []
        for field in given where field.name != .contentLength && field.name != .transferEncoding {
            if replaced.insert(field.name).inserted { fields[values: field.name] = [] }
            fields.append(field)
        }
    }

    /// Checks a request head after `adapt(_:)` and returns its absolute URL as text. Header
    /// fields need no check (`HTTPField` replaces invalid bytes with spaces); the pseudo-fields
    /// (scheme, authority, path) may have been set to anything.
    package static func urlString(of request: HTTPRequest) throws(CourierError) -> String {
        guard var scheme = request.scheme, let authority = request.authority, let path = request.path else {
            throw .invalidURL(.init(message: "The request has no scheme, authority or path"))
        }
        // Every request goes through here: the usual lower-case schemes are not lower-cased
        // again, and the text is built with one allocation.
        if scheme != "http" && scheme != "https" { scheme = scheme.lowercased() }
        var text = scheme
        text.reserveCapacity(scheme.utf8.count + 3 + authority.utf8.count + path.utf8.count)
        text += "://"
        // The engine sees one spelling of each host (no upper case, no trailing dot).
        text += HostName.normalizedAuthority(authority)
        text += path
        guard scheme == "http" || scheme == "https" else {
            throw .unsupportedScheme(
                .init(url: URL(string: text), message: "Only http and https URLs are supported, not \(scheme)"))
        }
        func isControlOrSpace(_ byte: UInt8) -> Bool { byte <= 0x20 || byte == 0x7F }
        guard !authority.isEmpty, path.utf8.first == UInt8(ascii: "/"),
            !authority.utf8.contains(where: isControlOrSpace), !path.utf8.contains(where: isControlOrSpace)
        else {
            throw .invalidURL(.init(url: URL(string: text), message: "'\(text)' is not a valid URL"))
        }
        return text
    }

    /// `Accept-Language` from the POSIX locale (`LANGUAGE`, `LC_ALL`, `LC_MESSAGES`, `LANG`),
    /// e.g. `de-AT, de;q=0.9`; `en` for the C and POSIX locales.
    package static let acceptLanguage: String = {
        let environment = ProcessInfo.processInfo.environment
        let raw =
            [environment["LANGUAGE"], environment["LC_ALL"], environment["LC_MESSAGES"], environment["LANG"]]
            .compactMap { $0 }.first { !$0.isEmpty } ?? "C"
        var tags: [String] = []
        for entry in raw.split(separator: ":") {
            let locale = entry.split(separator: ".").first.map(String.init) ?? ""
            let base = locale.split(separator: "@").first.map(String.init) ?? ""
            if base.isEmpty || base == "C" || base == "POSIX" { continue }
            let tag = base.replacingOccurrences(of: "_", with: "-")
            if !tags.contains(tag) { tags.append(tag) }
            if let language = tag.split(separator: "-").first.map(String.init), language != tag,
                !tags.contains(language)
            {
                tags.append(language)
            }
        }
        if tags.isEmpty { tags = ["en"] }
        return tags.prefix(6).enumerated().map { index, tag in
            index == 0 ? tag : "\(tag);q=\(String(format: "%.1f", 1.0 - Double(index) * 0.1))"
        }.joined(separator: ", ")
    }()
}

/// A base URL taken apart once, so that ordinary relative paths resolve by concatenation
/// instead of a URL parse per request.
package struct BaseURL: Sendable {
    let url: URL
    package let scheme: String
    package let authority: String
    /// The path, ending in "/".
    let directory: String

    package init?(_ url: URL?) {
        guard let url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host(percentEncoded: true), !host.isEmpty, url.query == nil, url.fragment == nil,
            url.user == nil, url.password == nil
        else { return nil }
        let path = url.path(percentEncoded: true)
        self.url = url
        self.scheme = scheme
        self.authority = url.port.map { "\(host):\($0)" } ?? host
        self.directory = path.isEmpty ? "/" : path
        guard directory.hasSuffix("/") else { return nil }
    }

    /// The path and query `relative` resolves to when it is a plain relative reference (RFC 3986
    /// section 5.2.2 reduces to "directory + reference" when the reference has no scheme, does
    /// not start with "/", "?" or "#", has no dot segments and only characters that need no
    /// encoding); nil otherwise, for Foundation to resolve.
    package func resolvePlain(_ relative: String) -> String? {
        let bytes = relative.utf8
        guard let first = bytes.first, first != UInt8(ascii: "/"), first != UInt8(ascii: "?") else { return nil }
        var inQuery = false
        var sawSlash = false
        var segmentLength = 0
        var segmentIsDots = true
        for byte in bytes {
            if inQuery {
                guard
                    Self.isPlain(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?")
                        || byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".")
                else { return nil }
                continue
            }
            switch byte {
            case UInt8(ascii: "/"), UInt8(ascii: "?"):
                if segmentIsDots && segmentLength > 0 && segmentLength <= 2 { return nil }  // "." or ".."
                if byte == UInt8(ascii: "?") { inQuery = true } else { sawSlash = true }
                segmentLength = 0
                segmentIsDots = true
            case UInt8(ascii: ":"):
                if !sawSlash { return nil }  // "name:..." could be a scheme
                segmentLength += 1
                segmentIsDots = false
            case UInt8(ascii: "."):
                segmentLength += 1
            default:
                guard Self.isPlain(byte) else { return nil }  // "#", spaces, non-ASCII...: Foundation decides
                segmentLength += 1
                segmentIsDots = false
            }
        }
        if !inQuery && segmentIsDots && segmentLength > 0 && segmentLength <= 2 { return nil }
        return directory + relative
    }

    /// Unreserved characters, percent signs and the sub-delimiters that need no encoding.
    private static func isPlain(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "~"),
            UInt8(ascii: "%"), UInt8(ascii: "="), UInt8(ascii: "&"), UInt8(ascii: "+"), UInt8(ascii: ","),
            UInt8(ascii: ";"), UInt8(ascii: "@"), UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "*"):
            return true
        default:
            return false
        }
    }
}
