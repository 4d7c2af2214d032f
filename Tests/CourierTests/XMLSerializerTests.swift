import Courier
import CourierXML
import Foundation
import Testing

/// `XMLResponseSerializer` (CourierXML) against httpbin: `/xml` is a slideshow served as
/// `application/xml`, `/base64/...` serves the bytes it is given.
@Suite struct XMLSerializerTests {
    /// httpbin's `/base64/<body>` path for `text` (URL-safe base64).
    private func base64Path(_ text: String) -> String {
        let encoded = Data(text.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        return "base64/\(encoded)"
    }

    @Test func anXMLBodyBecomesItsRootElement() async throws {
        let api = try await httpbinManager()
        let slideshow = try await api.GET("xml", serializer: XMLResponseSerializer())
        #expect(slideshow.name == "slideshow")
        #expect(slideshow.attributes["title"] == "Sample Slide Show")
        #expect(slideshow.attributes["author"] == "Yours Truly")
        let slides = slideshow.children(named: "slide")
        #expect(slides.map { $0["title"].text } == ["Wake up to WonderWidgets!", "Overview"])
        #expect(slides[1].children(named: "item").count == 3)
        #expect(slideshow["no-such-child"].name == "")
        #expect(slideshow.text == "")
    }

    @Test func otherContentTypesAndStatusesAreRefused() async throws {
        let api = try await httpbinManager()
        let html = await capturedError { _ = try await api.GET("html", serializer: XMLResponseSerializer()) }
        #expect(isCourierError(html) { if case .unacceptableContentType = $0 { true } else { false } })
        let missing = await capturedError { _ = try await api.GET("status/404", serializer: XMLResponseSerializer()) }
        #expect(isCourierError(missing) { if case .unacceptableStatusCode = $0 { true } else { false } })
        // A `+xml` type is accepted: this body (httpbin's JSON) then fails as XML, not as a type.
        let atom = await capturedError {
            _ = try await api.GET(
                "response-headers", parameters: ["Content-Type": "application/atom+xml"],
                serializer: XMLResponseSerializer())
        }
        #expect(isCourierError(atom) { if case .serializationFailed = $0 { true } else { false } })
    }

    @Test func aBodyThatIsNotWellFormedFailsAndTextAndCDATAAreKept() async throws {
        let api = try await httpbinManager()
        let anyType = XMLResponseSerializer(acceptableContentTypes: nil)
        let broken = await capturedError {
            _ = try await api.GET(base64Path("<a><b></a>"), serializer: anyType)
        }
        #expect(isCourierError(broken) { if case .serializationFailed = $0 { true } else { false } })
        let mixed = try await api.GET(base64Path("<note id=\"7\">Hi <![CDATA[<there>]]></note>"), serializer: anyType)
        #expect(mixed.text == "Hi <there>")
        #expect(mixed.attributes == ["id": "7"])
    }

    @Test func externalEntitiesAreNotRead() async throws {
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("xxe-\(UUID()).txt")
        try Data("top secret".utf8).write(to: secret)
        defer { try? FileManager.default.removeItem(at: secret) }
        let api = try await httpbinManager()
        let body = """
            <?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file://\(secret.path)">]><r>&x;</r>
            """
        // The document parses; the entity's text is left out, not read from the file.
        let root = try await api.GET(base64Path(body), serializer: XMLResponseSerializer(acceptableContentTypes: nil))
        #expect(root.name == "r")
        #expect(root.text == "")
    }
}
