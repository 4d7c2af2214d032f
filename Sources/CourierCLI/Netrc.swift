import Foundation

/// A `.netrc` file (the format of ftp(1), as curl reads it): `machine NAME login USER password
/// SECRET` entries and one `default` entry, separated by any white space; `account` is read
/// and ignored, and a `macdef` is skipped to the blank line that ends it. Tokens may be quoted
/// with `"`, with `\"` and `\\` inside.
struct Netrc {
    struct Entry: Equatable {
        var login: String?
        var password: String?
    }

    /// The entries by lower-cased machine name, first entry winning, and the default.
    private(set) var machines: [String: Entry] = [:]
    private(set) var fallback: Entry?

    /// Reads `text`; a malformed file is an error naming the token that is wrong.
    init(parsing text: String) throws {
        var tokens = Self.tokens(in: text)[...]
        var current: (name: String?, entry: Entry)?
        func finish() {
            guard let done = current else { return }
            if let name = done.name {
                if machines[name] == nil { machines[name] = done.entry }
            } else if fallback == nil {
                fallback = done.entry
            }
            current = nil
        }
        while let token = tokens.popFirst() {
            switch token {
            case "machine":
                finish()
                guard let name = tokens.popFirst() else { throw NetrcError("'machine' without a name") }
                current = (name.lowercased(), Entry())
            case "default":
                finish()
                current = (nil, Entry())
            case "login", "password", "account":
                guard current != nil else { throw NetrcError("'\(token)' before any 'machine' or 'default'") }
                guard let value = tokens.popFirst() else { throw NetrcError("'\(token)' without a value") }
                if token == "login" { current?.entry.login = value }
                if token == "password" { current?.entry.password = value }
            case "macdef":
                // Its name, then lines up to a blank line: `tokens` lost the line breaks, so a
                // macro is dropped with the rest of the file's tokens up to the next keyword.
                _ = tokens.popFirst()
                while let next = tokens.first, !["machine", "default"].contains(next) { tokens.removeFirst() }
            default:
                throw NetrcError("unexpected '\(token)'")
            }
        }
        finish()
    }

    /// The entry for `host` (any case), else the default's.
    func entry(for host: String) -> Entry? {
        machines[host.lowercased()] ?? fallback
    }

    /// The file's tokens, unquoted.
    private static func tokens(in text: String) -> [String] {
        var tokens: [String] = []
        var characters = text[...]
        while let first = characters.first {
            if first.isWhitespace {
                characters.removeFirst()
                continue
            }
            var token = ""
            if first == "\"" {
                characters.removeFirst()
                while let character = characters.popFirst(), character != "\"" {
                    if character == "\\", let escaped = characters.popFirst() {
                        token.append(escaped)
                    } else {
                        token.append(character)
                    }
                }
            } else {
                while let character = characters.first, !character.isWhitespace {
                    token.append(character)
                    characters.removeFirst()
                }
            }
            tokens.append(token)
        }
        return tokens
    }
}

/// What is wrong with a `.netrc` file.
struct NetrcError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
