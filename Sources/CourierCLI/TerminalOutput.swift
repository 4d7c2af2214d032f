import Courier
import Foundation
import HTTPTypes

/// Prints requests and responses the way HTTPie does: heads, then the body, JSON indented.
struct TerminalOutput {
    func printRequest(_ request: HTTPRequest, body: Data?) {
        var text = "\(request.method.rawValue) \(request.path ?? "/") HTTP/1.1\n"
        if let authority = request.authority { text += "Host: \(authority)\n" }
        for field in request.headerFields { text += "\(field.name.rawName): \(field.value)\n" }
        write(text + "\n")
        if let body, !body.isEmpty {
            write(Self.render(body, contentType: request.headerFields[.contentType]) + "\n\n")
        }
    }

    func printResponse(_ response: DataResponse<Data>, verbose: Bool) {
        printResponse(
            response.response, body: response.data, httpVersion: response.metrics.httpVersion, verbose: verbose)
    }

    /// The head (with `verbose`) and the body of a response; `httpVersion` empty for 1.1.
    func printResponse(_ response: HTTPResponse, body: Data, httpVersion: String, verbose: Bool) {
        if verbose {
            let version = httpVersion.isEmpty ? "1.1" : httpVersion
            var text = "HTTP/\(version) \(response.status.code) \(response.status.reasonPhrase)\n"
            for field in response.headerFields { text += "\(field.name.rawName): \(field.value)\n" }
            write(text + "\n")
        }
        guard !body.isEmpty else { return }
        let rendered = Self.render(body, contentType: response.headerFields[.contentType])
        write(rendered.hasSuffix("\n") ? rendered : rendered + "\n")
    }

    func printError(_ error: CourierError) {
        FileHandle.standardError.write(Data("courier: \(error)\n".utf8))
    }

    /// JSON bodies pretty-printed (keys sorted); text as text; binary summarised.
    static func render(_ body: Data, contentType: String?) -> String {
        let type = contentType?.lowercased() ?? ""
        let looksLikeJSON =
            type.contains("json") || type.contains("javascript") || body.first == UInt8(ascii: "{")
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
