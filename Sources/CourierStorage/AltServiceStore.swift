@_spi(CourierInternals) import CourierCore
import Foundation
import Synchronization

/// The https origins that said, through `Alt-Svc` (RFC 7838), that they speak HTTP/3 on the
/// same host and port, until when; and the origins whose QUIC attempt fell back to TCP lately.
///
/// What `HTTPVersionPreference.http3WhenAdvertised` decides by. Kept in a JSON file in
/// sessions with storage (written whole, atomically, when an origin comes or goes), in memory
/// otherwise. Only `h3` alternatives on the origin's own host and port are kept: libcurl races
/// QUIC against TCP to the URL's own authority, and an alternative elsewhere would need the
/// TCP fallback to go elsewhere too. Failed attempts are kept in memory only.
package final class AltServiceStore: Sendable {
    struct Entry: Codable, Equatable {
        var expires: Date
    }

    private struct State {
        var entries: [String: Entry]
        /// Origins whose last HTTP/3 attempt fell back to TCP, and until when they are asked
        /// over TCP only.
        var broken: [String: Date] = [:]
    }

    /// How long an origin whose QUIC attempt fell back is left alone.
    package static let brokenFor: TimeInterval = 300
    /// `ma` when the header gives none (RFC 7838 section 3.1: 24 hours).
    static let defaultMaxAge: Int64 = 86_400

    private let state: Locked<State>
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
            for (origin, entry) in decoded where entry.expires > now && Self.isOrigin(origin) {
                loaded[origin] = entry
            }
        }
        state = Locked(State(entries: loaded))
        populated.store(!loaded.isEmpty, ordering: .relaxed)
    }

    /// The key of an https origin: `host:port`, the host normalized (``HostName``), the port
    /// always written (443 when `authority` has none). nil for an empty host.
    package static func origin(authority: String) -> String? {
        var host = Substring(authority)
        var port = "443"
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") {
            host = authority[..<colon]
            port = String(authority[authority.index(after: colon)...])
            guard !port.isEmpty, port.allSatisfy(\.isASCII), port.allSatisfy(\.isNumber) else { return nil }
        }
        let name = HostName.normalized(String(host))
        guard !name.isEmpty else { return nil }
        // An IPv6 address keeps its brackets, so that the port stays apart from it.
        return name.contains(":") && !name.hasPrefix("[") ? "[\(name)]:\(port)" : "\(name):\(port)"
    }

    /// Whether a new connection to `origin` (an ``origin(authority:)`` key) should try HTTP/3:
    /// it advertised `h3` and has not fallen back lately.
    package func prefersHTTP3(_ origin: String) -> Bool {
        guard populated.load(ordering: .relaxed) else { return false }
        let now = Date()
        return state.withLock { state in
            guard let entry = state.entries[origin], entry.expires > now else { return false }
            if let until = state.broken[origin] {
                if until > now { return false }
                state.broken[origin] = nil
            }
            return true
        }
    }

    /// Notes the `Alt-Svc` field value `header` of a response from `origin`, which came over a
    /// verified https connection. `clear` forgets the origin; an `h3` entry on the same port
    /// (or on `port`, the origin's own, spelled out) keeps it for its `ma` seconds.
    package func record(_ header: String, origin: String) {
        guard let port = origin.split(separator: ":").last else { return }
        let advertised = Self.sameAuthorityHTTP3(header, port: String(port))
        state.withLock { state in
            let before = state.entries[origin]
            switch advertised {
            case .clear, .none:
                state.entries[origin] = nil
            case .some(let maxAge):
                let seconds = TimeInterval(min(maxAge, 1 << 40))
                state.entries[origin] = Entry(expires: Date(timeIntervalSinceNow: seconds))
            }
            populated.store(!state.entries.isEmpty, ordering: .relaxed)
            // Written when an origin comes or goes, not for the same header on every response.
            guard let file, (before == nil) != (state.entries[origin] == nil),
                let data = try? JSONEncoder().encode(state.entries)
            else { return }
            try? AtomicFile.replace(file, with: data, createsDirectory: true)
        }
    }

    /// Notes that a new connection to `origin` asked for HTTP/3 and got TCP: QUIC is not
    /// answering there (UDP blocked, or the server stopped speaking it).
    package func noteFallback(_ origin: String) {
        state.withLock { $0.broken[origin] = Date(timeIntervalSinceNow: Self.brokenFor) }
    }

    /// What an `Alt-Svc` value says of HTTP/3 on the origin's own authority.
    enum Advertised: Equatable {
        /// `clear`: forget every alternative.
        case clear
        /// `h3` on the same host and `port`, for this many seconds.
        case some(maxAge: Int64)
        /// No such alternative.
        case none
    }

    /// Reads `h3="[host]:port"` entries (RFC 7838 section 3; RFC 9114 section 3.1.1) and
    /// their `ma`; other protocols (`h3-29`, `h2`...) and alternatives on another host or
    /// port are ignored. The longest `ma` of the matching entries wins.
    static func sameAuthorityHTTP3(_ header: String, port: String) -> Advertised {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        if trimmed == "clear" { return .clear }
        var found: Int64?
        for alternative in split(trimmed, by: ",") {
            let parameters = split(alternative, by: ";")
            guard let first = parameters.first else { continue }
            let pair = first.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, pair[0] == "h3" else { continue }
            var authority = pair[1]
            guard authority.count >= 2, authority.hasPrefix("\""), authority.hasSuffix("\"") else { continue }
            authority = String(authority.dropFirst().dropLast())
            guard let colon = authority.lastIndex(of: ":"), authority[..<colon].isEmpty,
                String(authority[authority.index(after: colon)...]) == port
            else { continue }
            var maxAge = defaultMaxAge
            for parameter in parameters.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                guard pair.count == 2, pair[0].lowercased() == "ma" else { continue }
                let text = pair[1].hasPrefix("\"") ? String(pair[1].dropFirst().dropLast()) : pair[1]
                guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { continue }
                maxAge = Int64(text) ?? Int64.max
            }
            found = max(found ?? 0, maxAge)
        }
        guard let found else { return .none }
        return found == 0 ? .none : .some(maxAge: found)
    }

    /// `text` split at `separator` outside double quotes.
    private static func split(_ text: String, by separator: Character) -> [String] {
        var parts: [String] = []
        var current = ""
        var quoted = false
        for character in text {
            if character == "\"" { quoted.toggle() }
            if character == separator, !quoted {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current)
        return parts.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// A key as ``origin(authority:)`` writes it (for entries read from the file).
    private static func isOrigin(_ key: String) -> Bool {
        guard let colon = key.lastIndex(of: ":") else { return false }
        return !key[..<colon].isEmpty && key[key.index(after: colon)...].allSatisfy(\.isNumber)
    }
}
