import Courier
import Foundation

/// One HTTPie-style request item from the command line.
enum RequestItem: Equatable {
    /// `Header:value`
    case header(name: String, value: String)
    /// `name==value`
    case query(name: String, value: String)
    /// `name=value`: a string field of the JSON or form body.
    case field(name: String, value: String)
    /// `name:=json`: a raw JSON field of the JSON body.
    case jsonField(name: String, value: JSON)
    /// `name@path`: a file, sent as a part of a multipart form.
    case filePart(name: String, path: String)
    /// `@path`: a file, sent as the whole body.
    case bodyFile(path: String)

    /// Parses an item. The separator that comes first wins, longest first where they overlap
    /// (`:=` before `:`, `==` before `=`); a backslash escapes a separator character.
    static func parse(_ text: String) throws -> RequestItem {
        let characters = Array(text)
        var name = ""
        var index = 0
        while index < characters.count {
            let character = characters[index]
            if character == "\\", index + 1 < characters.count {
                name.append(characters[index + 1])
                index += 2
                continue
            }
            let rest = String(characters[(index + 1)...])
            switch character {
            case ":" where rest.hasPrefix("="):
                let raw = String(rest.dropFirst())
                do {
                    return .jsonField(name: name, value: try JSON(parsing: raw))
                } catch {
                    throw CLIError("'\(name):=\(raw)': the value is not valid JSON (\(error))")
                }
            case ":":
                guard !name.isEmpty else { throw CLIError("'\(text)': a header needs a name") }
                return .header(name: name, value: rest.trimmingCharacters(in: .whitespaces))
            case "=" where rest.hasPrefix("="):
                return .query(name: name, value: String(rest.dropFirst()))
            case "=":
                return .field(name: name, value: rest)
            case "@":
                return name.isEmpty ? .bodyFile(path: rest) : .filePart(name: name, path: rest)
            default:
                name.append(character)
                index += 1
            }
        }
        throw CLIError(
            "'\(text)' is not a request item (Header:value, name=value, name:=json, name==query, name@file, @file)")
    }
}

/// A usage or input error, printed without a stack of causes.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
