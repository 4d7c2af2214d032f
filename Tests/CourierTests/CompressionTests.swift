import Courier
import Foundation
import Testing

/// libcurl asks for and decodes every encoding it has (`CURLOPT_ACCEPT_ENCODING` "").
@Suite struct CompressionTests {
    @Test(arguments: ["gzip", "deflate", "brotli"])
    func compressedResponsesAreDecoded(encoding: String) async throws {
        let api = try await httpbinManager()
        let response = try await api.request(.get, encoding, serializer: JSONResponseSerializer())
        let flag = encoding == "brotli" ? "brotli" : encoding == "gzip" ? "gzipped" : "deflated"
        #expect(response.value[flag] == true)
        let sentEncoding = response.headerFields[.contentEncoding]
        #expect(sentEncoding == (encoding == "brotli" ? "br" : encoding))
        #expect(response.metrics.bytesReceived > 0)
    }

    @Test func theRequestAdvertisesEveryEncoding() async throws {
        let api = try await httpbinManager()
        let echo: JSON = try await api.GET("headers")
        let accepted = try #require(echo["headers"]["Accept-Encoding"].stringValue)
        for encoding in ["gzip", "deflate", "br", "zstd"] { #expect(accepted.contains(encoding)) }
    }

    @Test func compressionCanBeTurnedOff() async throws {
        let api = try await httpbinManager { $0.acceptsCompressedResponses = false }
        let echo: JSON = try await api.GET("headers")
        #expect(echo["headers"]["Accept-Encoding"] == nil)
    }
}
