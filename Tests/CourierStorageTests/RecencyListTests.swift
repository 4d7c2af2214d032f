import Testing

@testable import CourierStorage

/// `RecencyList`, the order `HTTPCache` evicts in: least recently used first, whatever was
/// used, removed or added in between.
@Suite struct RecencyListTests {
    static func list(_ keys: [String]) -> RecencyList<String> {
        var list = RecencyList<String>()
        for key in keys { list.use(key) }
        return list
    }

    @Test func keysComeOutInTheOrderTheyWereFirstUsed() {
        var list = Self.list(["a", "b", "c"])
        #expect(list.count == 3)
        #expect(list.keysFromOldest == ["a", "b", "c"])
        let removed = [list.removeOldest(), list.removeOldest(), list.removeOldest(), list.removeOldest()]
        #expect(removed == ["a", "b", "c", nil])
        #expect(list.oldest == nil)
        #expect(list.count == 0)
    }

    @Test func usingAKeyAgainMakesItTheNewest() {
        var list = Self.list(["a", "b", "c"])
        list.use("a")
        #expect(list.keysFromOldest == ["b", "c", "a"])
        list.use("c")
        #expect(list.keysFromOldest == ["b", "a", "c"])
        list.use("c")  // already the newest
        #expect(list.keysFromOldest == ["b", "a", "c"])
        #expect(list.count == 3)
    }

    @Test func removingAKeyLinksItsNeighbours() {
        var list = Self.list(["a", "b", "c", "d"])
        let middle = list.remove("b")
        #expect(middle)
        #expect(list.keysFromOldest == ["a", "c", "d"])
        let oldest = list.remove("a")
        #expect(oldest)
        #expect(list.oldest == "c")
        let newest = list.remove("d")
        #expect(newest)
        #expect(list.keysFromOldest == ["c"])
        let again = list.remove("d")
        #expect(!again)
        #expect(!list.contains("d"))
        #expect(list.contains("c"))
        let last = list.remove("c")
        #expect(last)
        #expect(list.keysFromOldest == [])
    }

    @Test func removedKeysNodesAreReusedInTheRightPlace() {
        var list = Self.list(["a", "b", "c"])
        list.remove("b")
        list.use("x")  // takes the node "b" had
        list.remove("a")
        list.use("y")
        #expect(list.keysFromOldest == ["c", "x", "y"])
        list.use("c")
        #expect(list.keysFromOldest == ["x", "y", "c"])
    }

    @Test func removeAllEmptiesTheList() {
        var list = Self.list(["a", "b"])
        list.removeAll()
        #expect(list.count == 0)
        #expect(list.oldest == nil)
        list.use("c")
        #expect(list.keysFromOldest == ["c"])
    }

    /// Against a plain array kept in the same order, over a long mix of operations.
    @Test func aLongMixOfOperationsKeepsTheSameOrderAsAnArray() {
        var list = RecencyList<Int>()
        var model: [Int] = []
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let key = Int.random(in: 0..<64, using: &generator)
            switch Int.random(in: 0..<4, using: &generator) {
            case 0:
                let removed = list.remove(key)
                #expect(removed == model.contains(key))
                model.removeAll { $0 == key }
            case 1:
                let oldest = list.removeOldest()
                #expect(oldest == (model.isEmpty ? nil : model.removeFirst()))
            default:
                list.use(key)
                model.removeAll { $0 == key }
                model.append(key)
            }
            #expect(list.count == model.count)
            #expect(list.oldest == model.first)
        }
        #expect(list.keysFromOldest == model)
    }
}
