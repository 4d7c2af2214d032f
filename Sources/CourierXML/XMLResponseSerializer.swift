import CourierCore
import CourierSerialization
import Foundation
import FoundationXML

/// An XML element as a value (named apart from FoundationXML's `XMLElement` class): its name, attributes, text and child elements, as
/// FoundationXML's `XMLParser` read them. `Sendable`, so that it can be a serializer's value
/// and cross tasks (FoundationXML's `XMLDocument` cannot).
///
/// ```swift
/// let feed = try await api.GET("feed.xml", serializer: XMLResponseSerializer())
/// for item in feed["channel"].children(named: "item") {
///     print(item["title"].text, item.attributes["id"] ?? "")
/// }
/// ```
public struct XMLValue: Sendable, Hashable {
    /// The element's name as written (with its prefix, if any: `atom:link`).
    public var name: String
    /// The attributes, by name.
    public var attributes: [String: String]
    /// The text directly inside the element (its child elements' text not included), with
    /// CDATA sections; whitespace between child elements is dropped.
    public var text: String
    /// The child elements, in document order.
    public var children: [XMLValue]

    /// An element.
    public init(name: String, attributes: [String: String] = [:], text: String = "", children: [XMLValue] = []) {
        self.name = name
        self.attributes = attributes
        self.text = text
        self.children = children
    }

    /// The first child element named `name`, or an empty element with no name when there is
    /// none, so that lookups chain: `document["channel"]["title"].text`.
    public subscript(name: String) -> XMLValue {
        children.first { $0.name == name } ?? XMLValue(name: "")
    }

    /// The child elements named `name`.
    public func children(named name: String) -> [XMLValue] {
        children.filter { $0.name == name }
    }
}

/// The body parsed as XML (FoundationXML's `XMLParser`) into its root ``XMLValue``, as
/// AFNetworking's XML serializers read it. Accepts `application/xml`, `text/xml` and any
/// `+xml` type by default, with a 2xx status.
///
/// External entities and DTDs are not loaded (`XMLParser` does not resolve external entities
/// by default, and this serializer does not turn it on), so a response cannot make the parser
/// read a file or a URL.
public struct XMLResponseSerializer: ResponseSerializer {
    /// The checks made before parsing.
    public var validation: ResponseValidation

    /// The media types XML serializers accept by default: `application/xml`, `text/xml` and
    /// any `+xml` type (`*/*+xml`).
    public static var defaultContentTypes: Set<String> { ["application/xml", "text/xml", "*/*+xml"] }

    /// Creates the serializer. `acceptableContentTypes` nil accepts any type.
    public init(
        acceptableStatusCodes: some Sequence<Int> = 200..<300,
        acceptableContentTypes: Set<String>? = XMLResponseSerializer.defaultContentTypes
    ) {
        validation = ResponseValidation(
            acceptableStatusCodes: acceptableStatusCodes, acceptableContentTypes: acceptableContentTypes)
    }

    /// Validates and parses the body.
    public func serialize(_ response: RawResponse) throws(CourierError) -> XMLValue {
        try validation.validate(response)
        let builder = XMLTreeBuilder()
        let parser = XMLParser(data: response.data)
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        guard parser.parse(), let root = builder.root else {
            let reason = parser.parserError.map { "\($0)" } ?? "no root element"
            throw .serializationFailed(
                response.errorContext(
                    "The body is not well-formed XML (line \(parser.lineNumber)): \(reason)",
                    underlying: DecodingFailure(description: reason)))
        }
        return root
    }
}

/// Builds the element tree from `XMLParser`'s callbacks.
private final class XMLTreeBuilder: NSObject, XMLParserDelegate {
    private var stack: [XMLValue] = []
    private(set) var root: XMLValue?

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
        qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]
    ) {
        stack.append(XMLValue(name: elementName, attributes: attributeDict))
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard !stack.isEmpty else { return }
        stack[stack.count - 1].text += string
    }

    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        guard !stack.isEmpty else { return }
        stack[stack.count - 1].text += String(decoding: CDATABlock, as: UTF8.self)
    }

    func parser(
        _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?
    ) {
        guard var element = stack.popLast() else { return }
        if !element.children.isEmpty, element.text.allSatisfy(\.isWhitespace) { element.text = "" }
        if stack.isEmpty {
            root = element
        } else {
            stack[stack.count - 1].children.append(element)
        }
    }
}
