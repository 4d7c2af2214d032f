import Courier
import Foundation
import HTTPTypes

/// Which parts of the exchange to print: HTTPie's `--print` letters, `H` the request head,
/// `B` the request body, `h` the response head, `b` the response body.
struct PrintedParts: Equatable {
    var requestHead = false
    var requestBody = false
    var responseHead = false
    var responseBody = false

    /// The response body alone: the default.
    static let body = PrintedParts(responseBody: true)
    /// Everything: `--verbose`.
    static let everything = PrintedParts(requestHead: true, requestBody: true, responseHead: true, responseBody: true)

    init(requestHead: Bool = false, requestBody: Bool = false, responseHead: Bool = false, responseBody: Bool = false) {
        self.requestHead = requestHead
        self.requestBody = requestBody
        self.responseHead = responseHead
        self.responseBody = responseBody
    }

    /// From letters of `HBhb`; nil for an empty string or any other letter.
    init?(letters: String) {
        guard !letters.isEmpty, letters.allSatisfy("HBhb".contains) else { return nil }
        self.init(
            requestHead: letters.contains("H"), requestBody: letters.contains("B"),
            responseHead: letters.contains("h"), responseBody: letters.contains("b"))
    }

    var printsRequest: Bool { requestHead || requestBody }
}

/// Prints requests and responses the way HTTPie does: heads, then the body, JSON indented, and
/// colored when `colors` (standard output is a terminal and `NO_COLOR` is not set).
struct TerminalOutput {
    var parts = PrintedParts.body
    var colors = TerminalOutput.writesToColorTerminal

    /// Whether standard output is a terminal that takes colors (`NO_COLOR` unset or empty).
    static var writesToColorTerminal: Bool {
        isatty(STDOUT_FILENO) != 0 && (ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
    }

    func printRequest(_ request: HTTPRequest, body: Data?) {
        if parts.requestHead {
            var text = "\(request.method.rawValue) \(request.path ?? "/") HTTP/1.1\n"
            if let authority = request.authority { text += "Host: \(authority)\n" }
            for field in request.headerFields { text += "\(field.name.rawName): \(field.value)\n" }
            write(text + "\n")
        }
        if parts.requestBody, let body, !body.isEmpty {
            write(render(body, contentType: request.headerFields[.contentType]) + "\n\n")
        }
    }

    func printResponse(_ response: DataResponse<Data>) {
        printResponse(response.response, body: response.data, httpVersion: response.metrics.httpVersion)
    }

    /// The head and the body of a response, as `parts` asks; `httpVersion` empty for 1.1.
    func printResponse(_ response: HTTPResponse, body: Data, httpVersion: String) {
        if parts.responseHead {
            let version = httpVersion.isEmpty ? "1.1" : httpVersion
            var text = "HTTP/\(version) \(response.status.code) \(response.status.reasonPhrase)\n"
            for field in response.headerFields { text += "\(field.name.rawName): \(field.value)\n" }
            write(text + "\n")
        }
        guard parts.responseBody, !body.isEmpty else { return }
        let rendered = render(body, contentType: response.headerFields[.contentType])
        write(rendered.hasSuffix("\n") ? rendered : rendered + "\n")
    }

    func printError(_ error: CourierError) {
        FileHandle.standardError.write(Data("courier: \(error)\n".utf8))
    }

    /// `render(_:contentType:)`, with JSON colored when `colors`.
    func render(_ body: Data, contentType: String?) -> String {
        let text = Self.render(body, contentType: contentType)
        guard colors, Self.isJSON(body, contentType: contentType) else { return text }
        return Self.colored(json: text)
    }

    /// Whether the body is rendered as JSON.
    static func isJSON(_ body: Data, contentType: String?) -> Bool {
        let looksLikeJSON =
            isJSONType(contentType?.lowercased() ?? "") || body.first == UInt8(ascii: "{")
            || body.first == UInt8(ascii: "[")
        return looksLikeJSON && (try? JSON(parsing: body)) != nil
    }

    /// Whether a (lower-case) content type names JSON, which is indented: not the line-by-line
    /// kinds (NDJSON, JSON Lines), which are written as they arrive.
    static func isJSONType(_ type: String) -> Bool {
        guard !["ndjson", "jsonl", "json-seq"].contains(where: type.contains) else { return false }
        return type.contains("json") || type.contains("javascript")
    }

    /// Pretty-printed JSON with ANSI colors: keys blue, strings green, numbers cyan, `true`,
    /// `false` and `null` magenta; punctuation plain.
    static func colored(json text: String) -> String {
        let key = "\u{1B}[34m", string = "\u{1B}[32m", number = "\u{1B}[36m", literal = "\u{1B}[35m"
        let reset = "\u{1B}[0m"
        let scalars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        var index = 0
        func append(_ color: String, _ range: Range<Int>) {
            out.append(contentsOf: color.unicodeScalars)
            out.append(contentsOf: scalars[range])
            out.append(contentsOf: reset.unicodeScalars)
        }
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "\"" {
                var end = index + 1
                while end < scalars.count, scalars[end] != "\"" { end += scalars[end] == "\\" ? 2 : 1 }
                end = min(end + 1, scalars.count)
                var next = end
                while next < scalars.count, scalars[next] == " " { next += 1 }
                append(next < scalars.count && scalars[next] == ":" ? key : string, index..<end)
                index = end
            } else if scalar == "-" || ("0"..."9").contains(scalar) {
                var end = index + 1
                while end < scalars.count, "0123456789+-.eE".unicodeScalars.contains(scalars[end]) { end += 1 }
                append(number, index..<end)
                index = end
            } else if let word = ["true", "false", "null"].first(where: {
                scalars[index...].starts(with: $0.unicodeScalars)
            }) {
                append(literal, index..<(index + word.unicodeScalars.count))
                index += word.unicodeScalars.count
            } else {
                out.append(scalar)
                index += 1
            }
        }
        return String(out)
    }

    /// JSON bodies pretty-printed (keys sorted); text as text; binary summarised.
    static func render(_ body: Data, contentType: String?) -> String {
        let looksLikeJSON =
            isJSONType(contentType?.lowercased() ?? "") || body.first == UInt8(ascii: "{")
            || body.first == UInt8(ascii: "[")
        if looksLikeJSON, let json = try? JSON(parsing: body) {
            return String(decoding: json.serialized(prettyPrinted: true), as: UTF8.self)
        }
        if let text = String(data: body, encoding: .utf8) { return text }
        return
            "+-----------------------------------------+\n| NOTE: binary data not shown (\(body.count) bytes) |\n+-----------------------------------------+"
    }

    private func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}
