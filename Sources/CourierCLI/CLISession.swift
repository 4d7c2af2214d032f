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
    var cookies: [StoredCookie] = []

    /// The file of session `name` for `url`'s host and port.
    static func file(name: String, url: String) throws -> URL {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "._-"))
        guard !name.isEmpty, name != ".", name != "..", name.unicodeScalars.allSatisfy(allowed.contains) else {
            throw CLIError("--session takes a name of letters, digits, '.', '_' and '-', not '\(name)'")
        }
        guard let target = URL(string: url), let host = target.host?.lowercased(), !host.isEmpty else {
            throw CLIError("--session needs a URL with a host, not '\(url)'")
        }
        let environment = ProcessInfo.processInfo.environment
        let config =
            environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: environment["HOME"] ?? NSHomeDirectory()).appendingPathComponent(".config")
        let hostDirectory = target.port.map { "\(host)_\($0)" } ?? host
        return config.appendingPathComponent("courier/sessions").appendingPathComponent(
            hostDirectory.replacingOccurrences(of: "/", with: "_")
        ).appendingPathComponent("\(name).json")
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
