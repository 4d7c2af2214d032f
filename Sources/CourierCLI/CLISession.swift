import Courier
import Foundation

/// `--session NAME`: cookies and credentials kept between runs, as HTTPie's named sessions keep
/// them. A session belongs to one host (and port), so its credentials never go to another:
/// `$XDG_CONFIG_HOME/courier/sessions/HOST[_PORT]/NAME.json` (`~/.config` without
/// `XDG_CONFIG_HOME`). The file holds passwords and tokens in clear, as HTTPie's does: it is
/// written with permissions 0600, in a directory only its owner can enter.
struct CLISession: Codable {
    /// A cookie as the file keeps it (session cookies included, as a browser session would).
    struct StoredCookie: Codable {
        var name: String
        var value: String
        var domain: String
        var includesSubdomains: Bool
        var path: String
        /// Seconds since 1970; nil for a session cookie.
        var expires: Double?
        var isSecure: Bool
        var isHTTPOnly: Bool

        init(_ cookie: Cookie) {
            name = cookie.name
            value = cookie.value
            domain = cookie.domain
            includesSubdomains = cookie.includesSubdomains
            path = cookie.path
            expires = cookie.expires?.timeIntervalSince1970
            isSecure = cookie.isSecure
            isHTTPOnly = cookie.isHTTPOnly
        }

        var cookie: Cookie {
            Cookie(
                name: name, value: value, domain: domain, includesSubdomains: includesSubdomains, path: path,
                expires: expires.map { Date(timeIntervalSince1970: $0) }, isSecure: isSecure, isHTTPOnly: isHTTPOnly)
        }
    }

    /// `USER:PASSWORD` from `--auth`.
    var auth: String?
    /// The token from `--bearer`.
    var bearer: String?
    /// The scheme of the run that gave `auth` or `bearer` (`https` or `http`, or a WebSocket's
    /// `wss` or `ws`). A credential given over https (or wss) is never sent over plain http
    /// (or ws), although the session (kept by host and port, as HTTPie keeps it) is the same;
    /// nil (a file from before) counts as https.
    var credentialScheme: String?
    var cookies: [StoredCookie] = []

    /// The file of session `name` for `url`'s host and port.
    static func file(name: String, url: String) throws -> URL {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "._-"))
        guard !name.isEmpty, name != ".", name != "..", name.unicodeScalars.allSatisfy(allowed.contains) else {
            throw CLIError("--session takes a name of letters, digits, '.', '_' and '-', not '\(name)'")
        }
        guard let target = URL(string: url), let host = directoryName(of: target) else {
            throw CLIError("--session needs a URL with a host name or address, not '\(url)'")
        }
        let environment = ProcessInfo.processInfo.environment
        let config =
            environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: environment["HOME"] ?? NSHomeDirectory()).appendingPathComponent(".config")
        let hostDirectory = target.port.map { "\(host)_\($0)" } ?? host
        return config.appendingPathComponent("courier/sessions").appendingPathComponent(hostDirectory)
            .appendingPathComponent("\(name).json")
    }

    /// The folder name for `url`'s host: the host as Courier compares hosts (lower case, no
    /// trailing dot, IDNA in ASCII), an IPv6 address in brackets; nil unless every label is
    /// non-empty and of letters, digits, `-` and `_`, so that no host names a folder outside
    /// `sessions/` (`..`, `.`) or two spellings of one host two folders.
    static func directoryName(of url: URL) -> String? {
        // A protection space's host is the normalized one.
        guard let host = ProtectionSpace(url: url)?.host, !host.isEmpty else { return nil }
        if host.contains(":") {
            let hex = CharacterSet(charactersIn: "0123456789abcdef:.")
            return host.unicodeScalars.allSatisfy(hex.contains) ? "[\(host)]" : nil
        }
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz0123456789-_")
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.allSatisfy({ !$0.isEmpty && $0.unicodeScalars.allSatisfy(allowed.contains) }) else { return nil }
        return host
    }

    /// Whether the saved `auth` or `bearer` may go with a request to `url`: not over plain
    /// http when it was given over https. A WebSocket's scheme counts as its handshake's (ws
    /// as http, wss as https), as `ProtectionSpace` counts it.
    func credentialMayGo(to url: URL) -> Bool {
        Self.httpScheme(url.scheme) == "https" || Self.httpScheme(credentialScheme) == "http"
    }

    /// `scheme` lower-cased, ws as http and wss as https.
    static func httpScheme(_ scheme: String?) -> String? {
        switch scheme?.lowercased() {
        case "ws": "http"
        case "wss": "https"
        case let other: other
        }
    }

    /// The session in `file`; an empty one when there is no file yet.
    static func load(from file: URL) throws -> CLISession {
        guard FileManager.default.fileExists(atPath: file.path) else { return CLISession() }
        do {
            return try JSONDecoder().decode(CLISession.self, from: Data(contentsOf: file))
        } catch {
            throw CLIError("--session: \(file.path) cannot be read: \(error)")
        }
    }

    /// Writes the session to `file`, whole or not at all, readable by its owner only.
    func save(to file: URL) throws {
        let directory = file.deletingLastPathComponent()
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let part = directory.appendingPathComponent(".\(file.lastPathComponent).\(UUID().uuidString).part")
        guard
            FileManager.default.createFile(
                atPath: part.path, contents: try encoder.encode(self), attributes: [.posixPermissions: 0o600])
        else {
            throw CLIError("--session: cannot write \(part.path)")
        }
        if rename(part.path, file.path) != 0 {
            try? FileManager.default.removeItem(at: part)
            throw CLIError("--session: cannot write \(file.path): errno \(errno)")
        }
    }

    /// The session's cookies into `api`'s store.
    func restoreCookies(into api: HTTPSessionManager) async {
        for stored in cookies { _ = await api.cookies.set(stored.cookie) }
    }

    /// `api`'s cookies now (the file keeps what the responses set).
    mutating func keepCookies(of api: HTTPSessionManager) async {
        cookies = await api.cookies.all().map(StoredCookie.init)
    }
}
