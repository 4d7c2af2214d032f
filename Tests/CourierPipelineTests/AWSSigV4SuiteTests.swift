@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Testing

@testable import CourierPipeline

/// `AWSSigV4Signer` against AWS's Signature Version 4 test suite
/// (`Tests/Support/aws-signing-test-suite`): for every case, the canonical request, the string
/// to sign, the signature and the `Authorization` field, as the suite's files have them.
@Suite struct AWSSigV4SuiteTests {
    static let suite = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Support/aws-signing-test-suite/v4")

    static let cases: [String] = {
        ((try? FileManager.default.contentsOfDirectory(atPath: suite.path)) ?? []).sorted()
    }()

    private struct Context: Decodable {
        struct Credentials: Decodable {
            var access_key_id: String
            var secret_access_key: String
            var token: String?
        }
        var credentials: Credentials
        var normalize: Bool
        var region: String
        var service: String
        var sign_body: Bool
        var timestamp: String
        var omit_session_token: Bool?
    }

    /// `request.txt`: the request line, fields (a line that starts with white space continues
    /// the one before), a blank line, the body.
    private static func request(_ text: String) throws -> (HTTPRequest, Data) {
        let (head, body): (Substring, Substring) = {
            guard let range = text.range(of: "\n\n") else { return (Substring(text), "") }
            return (text[..<range.lowerBound], text[range.upperBound...])
        }()
        var lines = head.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines.removeFirst()
        let method = String(requestLine.prefix { $0 != " " })
        let target = String(requestLine.dropFirst(method.count + 1).dropLast(" HTTP/1.1".count))
        var fields: [(String, String)] = []
        for line in lines where !line.isEmpty {
            if line.first == " " || line.first == "\t", let last = fields.popLast() {
                fields.append((last.0, last.1 + " " + line.trimmingCharacters(in: .whitespaces)))
                continue
            }
            let name = String(line.prefix { $0 != ":" })
            fields.append((name, String(line.dropFirst(name.count + 1))))
        }
        let host = try #require(fields.first { $0.0.lowercased() == "host" }?.1)
        var request = HTTPRequest(
            method: try #require(HTTPRequest.Method(method)), scheme: "https", authority: host, path: target)
        for (name, value) in fields where name.lowercased() != "host" {
            request.headerFields.append(HTTPField(name: try #require(HTTPField.Name(name)), value: value))
        }
        return (request, Data(body.utf8))
    }

    private static func file(_ name: String, _ file: String) throws -> String {
        try String(contentsOf: suite.appendingPathComponent(name).appendingPathComponent(file), encoding: .utf8)
    }

    @Test func theSuiteIsThere() {
        #expect(Self.cases.count >= 30)
    }

    @Test(arguments: cases)
    func signsAsTheSuiteSays(name: String) throws {
        let context = try JSONDecoder().decode(Context.self, from: Data(try Self.file(name, "context.json").utf8))
        let (request, body) = try Self.request(try Self.file(name, "request.txt"))
        var signer = AWSSigV4Signer(
            region: context.region, service: context.service,
            credentials: AWSCredentials(accessKeyID: "", secretAccessKey: ""))
        signer.normalizesPath = context.normalize
        signer.encodesPath = true  // the suite's requests carry their paths unencoded
        signer.sendsPayloadHash = context.sign_body
        let omitsToken = context.omit_session_token == true
        let credentials = AWSCredentials(
            accessKeyID: context.credentials.access_key_id, secretAccessKey: context.credentials.secret_access_key,
            sessionToken: omitsToken ? nil : context.credentials.token)
        let date = try #require(ISO8601DateFormatter().date(from: context.timestamp))
        let signed = signer.signed(
            request, credentials: credentials, payloadHash: SHA256.hex(SHA256.hash(body)), date: date)
        #expect(signed.canonicalRequest == (try Self.file(name, "header-canonical-request.txt")))
        #expect(signed.stringToSign == (try Self.file(name, "header-string-to-sign.txt")))
        let signature = try Self.file(name, "header-signature.txt").trimmingCharacters(in: .whitespacesAndNewlines)
        let authorization = try #require(signed.request.headerFields[.authorization])
        #expect(authorization.hasSuffix("Signature=\(signature)"))
        // The Authorization line of the signed request, as the suite writes it.
        let expected = try Self.file(name, "header-signed-request.txt").split(separator: "\n")
            .first { $0.hasPrefix("Authorization:") }
        #expect(expected.map { String($0.dropFirst("Authorization:".count)) } == authorization)
    }

    @Test func sha256AndHMACMatchTheirStandardVectors() {
        #expect(
            SHA256.hex(SHA256.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(SHA256.hex(SHA256.hash(million)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        // RFC 4231 test case 2, and case 6 (a key longer than a block).
        #expect(
            SHA256.hex(SHA256.hmac(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(
            SHA256.hex(
                SHA256.hmac(
                    key: [UInt8](repeating: 0xaa, count: 131),
                    Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }
}
