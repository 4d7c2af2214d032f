import CourierCore
import CourierJSON
import CourierSerialization
import Foundation
import Testing

@Suite struct QueryStringEncodingTests {
    @Test func keysAreSorted() throws {
        #expect(try QueryStringEncoding.encode(["b": 2, "a": 1, "c": "x"]) == "a=1&b=2&c=x")
    }

    @Test func nestedObjectsUseBrackets() throws {
        let encoded = try QueryStringEncoding.encode(["user": ["name": "Ben", "age": 40]])
        #expect(encoded == "user%5Bage%5D=40&user%5Bname%5D=Ben")
    }

    @Test func arraysRepeatTheKeyWithEmptyBrackets() throws {
        #expect(try QueryStringEncoding.encode(["tags": ["a", "b"]]) == "tags%5B%5D=a&tags%5B%5D=b")
    }

    @Test func arraysOfObjectsNest() throws {
        let encoded = try QueryStringEncoding.encode(["items": [["id": 1]]])
        #expect(encoded == "items%5B%5D%5Bid%5D=1")
    }

    @Test func booleansAreNumericAndNullIsTheBareKey() throws {
        #expect(try QueryStringEncoding.encode(["on": true, "off": false, "none": nil]) == "none&off=0&on=1")
    }

    @Test func numbersAreWrittenAsJSONWritesThem() throws {
        #expect(try QueryStringEncoding.encode(["i": 3, "d": 2.5, "whole": 2.0]) == "d=2.5&i=3&whole=2")
    }

    @Test func everythingButUnreservedQuestionMarkAndSlashIsEscaped() throws {
        let encoded = try QueryStringEncoding.encode(["q": "a b&c=d/e?f#g+h%i:j@k!l'm(n)o*p,q;r~s_t.u-v"])
        #expect(encoded == "q=a%20b%26c%3Dd/e?f%23g%2Bh%25i%3Aj%40k%21l%27m%28n%29o%2Ap%2Cq%3Br~s_t.u-v")
    }

    @Test func nonASCIIIsPercentEncodedUTF8() throws {
        #expect(try QueryStringEncoding.encode(["name": "Zoë 🚀"]) == "name=Zo%C3%AB%20%F0%9F%9A%80")
    }

    @Test func emptyArrayAndObjectContributeNothing() throws {
        #expect(try QueryStringEncoding.encode(["a": [], "b": [:], "c": 1]) == "c=1")
    }

    @Test func nonObjectParametersAreRefused() {
        #expect(throws: CourierError.self) { try QueryStringEncoding.encode([1, 2]) }
        #expect(throws: CourierError.self) { try QueryStringEncoding.encode("text") }
    }
}
