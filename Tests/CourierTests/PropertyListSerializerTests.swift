import Courier
import Foundation
import Testing

/// Property lists both ways, and a compound serializer that reads whichever the server sent,
/// against httpbin (which echoes a request body) and the fault server (any body and type).
@Suite struct PropertyListSerializerTests {
    private struct Settings: Codable, Sendable, Equatable {
        var theme: String
        var volume: Int
    }

    private static let plist = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0"><dict><key>theme</key><string>dark</string><key>volume</key><integer>7</integer></dict></plist>
        """

    private func probe(body: String, type: String) -> String {
        let allowed = CharacterSet.alphanumerics
        return "cache-probe/plist-\(UUID().uuidString.prefix(8))?body="
            + (body.addingPercentEncoding(withAllowedCharacters: allowed) ?? "") + "&type="
            + (type.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")
    }

    @Test func aPropertyListBodyIsDecoded() async throws {
        let api = try await faultManager()
        let settings = try await api.GET(
            probe(body: Self.plist, type: "application/x-plist"),
            serializer: PropertyListResponseSerializer(Settings.self))
        #expect(settings == Settings(theme: "dark", volume: 7))
        // Another content type is refused, as every serializer refuses one it does not read.
        let error = await capturedError {
            _ = try await api.GET(
                probe(body: Self.plist, type: "text/plain"), serializer: PropertyListResponseSerializer(Settings.self))
        }
        #expect(isCourierError(error) { if case .unacceptableContentType = $0 { true } else { false } })
        let broken = await capturedError {
            _ = try await api.GET(
                probe(body: "<plist>", type: "application/x-plist"),
                serializer: PropertyListResponseSerializer(Settings.self))
        }
        #expect(isCourierError(broken) { if case .serializationFailed = $0 { true } else { false } })
    }

    @Test func parametersGoOutAsAPropertyList() async throws {
        let api = try await httpbinManager()
        api.requestSerializer = PropertyListRequestSerializer()
        let echo: JSON = try await api.POST("post", parameters: ["theme": "dark", "volume": 7, "tags": ["a", "b"]])
        #expect(echo["headers"]["Content-Type"] == "application/x-plist")
        let body = try #require(echo["data"].stringValue)
        let decoded = try PropertyListSerialization.propertyList(from: Data(body.utf8), format: nil) as? [String: Any]
        #expect(decoded?["theme"] as? String == "dark")
        #expect(decoded?["volume"] as? Int == 7)
        #expect(decoded?["tags"] as? [String] == ["a", "b"])
        // A null has no property-list form: refused before anything is sent.
        let error = await capturedError { let _: JSON = try await api.POST("post", parameters: ["gone": nil]) }
        #expect(isCourierError(error) { if case .serializationFailed = $0 { true } else { false } })
    }

    @Test func aCompoundSerializerReadsWhicheverTypeCame() async throws {
        let api = try await faultManager()
        let either = CompoundResponseSerializer<Settings>([
            DecodableResponseSerializer(Settings.self), PropertyListResponseSerializer(Settings.self),
        ])
        let fromJSON = try await api.GET(
            probe(body: #"{"theme":"light","volume":3}"#, type: "application/json"), serializer: either)
        #expect(fromJSON == Settings(theme: "light", volume: 3))
        let fromPlist = try await api.GET(probe(body: Self.plist, type: "application/x-plist"), serializer: either)
        #expect(fromPlist == Settings(theme: "dark", volume: 7))
        let error = await capturedError {
            _ = try await api.GET(probe(body: "hello", type: "text/plain"), serializer: either)
        }
        #expect(isCourierError(error) { if case .unacceptableContentType = $0 { true } else { false } })
    }
}
