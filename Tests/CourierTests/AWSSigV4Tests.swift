import Foundation
import HTTPTypes
import Testing

@testable import Courier

/// `AWSSigV4Signer` end to end: requests signed by Courier and checked by botocore's signer
/// on the server's side (`Tests/Support/serve_sigv4.py`), with the fields, path, query and body
/// as they arrived.
@Suite struct AWSSigV4Tests {
    static let credentials = AWSCredentials(
        accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")

    private func manager(_ server: DedicatedServer, _ signer: AWSSigV4Signer) -> HTTPSessionManager {
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.interceptors = [signer]
        return HTTPSessionManager(baseURL: server.url, configuration: configuration)
    }

    private let anyStatus = JSONResponseSerializer(acceptableStatusCodes: 100..<600)

    @Test func aGetWithAQueryAndAPostWithABodyAreVerified() async throws {
        let server = try await TestServers.sigV4Checker()
        let api = manager(server, AWSSigV4Signer(region: "eu-west-1", service: "es", credentials: Self.credentials))
        let search = try await api.request(
            .get, "logs-2026/_search",
            parameters: ["q": "status:500 AND path:/api", "size": 10, "sort": "@timestamp:desc"],
            headers: ["X-Tenant": "  acme   corp "], serializer: anyStatus)
        #expect(search.status.code == 200, "\(search.value)")
        #expect(search.value["verified"] == true)
        let signed = search.value["signed_headers"].arrayValue?.compactMap(\.stringValue) ?? []
        #expect(signed.contains("host") && signed.contains("x-amz-date") && signed.contains("x-tenant"))
        #expect(!signed.contains("user-agent"))

        let posted = try await api.request(
            .post, "logs-2026/_doc", parameters: ["message": "disk full", "level": "error"], serializer: anyStatus)
        #expect(posted.status.code == 200, "\(posted.value)")
        await server.stop()
    }

    @Test func s3SignsTheFileAndTheTokenAndAStreamAsUnsigned() async throws {
        let server = try await TestServers.sigV4Checker()
        var temporary = Self.credentials
        temporary.sessionToken = "FQoGZXIvYXdzEXAMPLETOKEN"
        let api = manager(server, AWSSigV4Signer(region: "us-east-1", service: "s3", credentials: temporary))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sigv4-\(UUID().uuidString).bin")
        try Data((0..<300_000).map { UInt8($0 % 251) }).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let put = try await api.uploadTask(
            .put, "bucket/reports/q3 final.bin", body: .file(file), serializer: anyStatus
        ).response
        #expect(put.status.code == 200, "\(put.value)")
        let signed = put.value["signed_headers"].arrayValue?.compactMap(\.stringValue) ?? []
        #expect(signed.contains("x-amz-content-sha256") && signed.contains("x-amz-security-token"))

        let chunks = AsyncStream<Data> { continuation in
            for index in 0..<4 { continuation.yield(Data(repeating: UInt8(index), count: 10_000)) }
            continuation.finish()
        }
        let streamed = try await api.uploadTask(
            .put, "bucket/streamed.bin", body: .stream(chunks), serializer: anyStatus
        ).response
        #expect(streamed.status.code == 200, "\(streamed.value)")
        #expect(streamed.value["canonical_request"].stringValue?.hasSuffix("\nUNSIGNED-PAYLOAD") == true)
        await server.stop()
    }

    @Test func aWrongSecretIsRefused() async throws {
        let server = try await TestServers.sigV4Checker()
        var wrong = Self.credentials
        wrong.secretAccessKey = "not the secret"
        let api = manager(server, AWSSigV4Signer(region: "eu-west-1", service: "es", credentials: wrong))
        let refused = try await api.request(.get, "logs/_search", serializer: anyStatus)
        #expect(refused.status.code == 403)
        #expect(refused.value["verified"] == false)
        #expect(refused.value["expected"].stringValue?.count == 64)
        await server.stop()
    }
}
