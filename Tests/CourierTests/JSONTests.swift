import Courier
import Foundation
import Testing

@Suite struct JSONTests {
    @Test func literalsMixTypes() {
        let json: JSON = ["page": 2, "ratio": 0.5, "tags": ["a", "b"], "draft": false, "none": nil]
        #expect(json["page"].intValue == 2)
        #expect(json["ratio"].doubleValue == 0.5)
        #expect(json["tags"][1] == "b")
        #expect(json["draft"].boolValue == false)
        #expect(json["none"].isNull)
        #expect(json["missing"]["deeper"] == nil)
    }

    @Test func parsesEveryKindOfValue() throws {
        let text =
            #"{"a":[1,-2.5e3,true,false,null],"b":{"c":"d"},"e":"\u00e9\ud83d\ude80\n\"","big":12345678901234567890}"#
        let json = try JSON(parsing: text)
        #expect(json["a"] == [1, -2500.0, true, false, nil])
        #expect(json["b"]["c"] == "d")
        #expect(json["e"] == "é🚀\n\"")
        #expect(json["big"].doubleValue == 12345678901234567890.0)
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\" 1}", "01", "1.", "tru", "\"\u{01}\"", "[1] x", "\"\\q\""])
    func rejectsInvalidText(text: String) {
        #expect(throws: JSONParsingError.self) { try JSON(parsing: text) }
    }

    @Test func refusesDeepNesting() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParsingError.self) { try JSON(parsing: deep) }
    }

    @Test func writesSortedCompactText() {
        let json: JSON = ["b": [1, 2.5, "x\"y\u{1}"], "a": nil, "c": ["z": true]]
        #expect(json.description == #"{"a":null,"b":[1,2.5,"x\"y\u0001"],"c":{"z":true}}"#)
    }

    @Test func roundTripsThroughText() throws {
        let json: JSON = ["name": "Zoë", "list": [1, 2, ["deep": [nil, false]]], "n": -0.125]
        #expect(try JSON(parsing: json.serialized()) == json)
        #expect(try JSON(parsing: json.serialized(prettyPrinted: true)) == json)
    }

    @Test func numbersCompareByValue() {
        #expect(JSON.int(2) == JSON.double(2.0))
        #expect(Set<JSON>([.int(2), .double(2.0)]).count == 1)
        #expect(JSON.int(2) != JSON.double(2.5))
    }

    @Test func convertsEncodableAndDecodable() throws {
        struct Point: Codable, Equatable {
            var x: Int
            var label: String?
        }
        let json = try JSON(encoding: Point(x: 3, label: "p"))
        #expect(json == ["x": 3, "label": "p"])
        #expect(try json.decode(Point.self) == Point(x: 3, label: "p"))
        let decoded = try JSONDecoder().decode(JSON.self, from: Data(#"{"k":[1,"two",null]}"#.utf8))
        #expect(decoded == ["k": [1, "two", nil]])
    }

    @Test func removesNullMembersRecursively() {
        let json: JSON = ["a": nil, "b": ["c": nil, "d": 1], "e": [nil, 2]]
        #expect(json.removingNullValues() == ["b": ["d": 1], "e": [nil, 2]])
    }
}
