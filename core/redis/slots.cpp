#include "core/redis/slots.h"

namespace keywatch {

namespace {

// CRC16/XMODEM (polynomial 0x1021, initial 0), one table lookup per byte.
struct Crc16Table {
    uint16_t t[256];
    constexpr Crc16Table() : t{} {
        for (int b = 0; b < 256; b++) {
            uint16_t crc = static_cast<uint16_t>(b << 8);
            for (int i = 0; i < 8; i++)
                crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                     : static_cast<uint16_t>(crc << 1);
            t[b] = crc;
        }
    }
};
constexpr Crc16Table kCrc16;

}  // namespace

uint16_t crc16(std::string_view data) {
    uint16_t crc = 0;
    for (unsigned char byte : data)
        crc = static_cast<uint16_t>((crc << 8) ^ kCrc16.t[((crc >> 8) ^ byte) & 0xff]);
    return crc;
}

std::string_view hash_tag(std::string_view key) {
    size_t open = key.find('{');
    if (open == std::string_view::npos) return key;
    size_t close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return key;
    return key.substr(open + 1, close - open - 1);
}

int key_slot(std::string_view key) {
    return crc16(hash_tag(key)) & (kSlotCount - 1);
}

SlotTags::SlotTags() : tags_(kSlotCount) {
    // Shortest first, in a fixed order over [0-9a-z], so every instance builds the same
    // table. Three characters cover all 16384 slots.
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    const int n = sizeof alphabet - 1;
    int missing = kSlotCount;
    std::string tag;
    for (int len = 1; missing > 0; len++) {
        std::vector<int> digits(static_cast<size_t>(len), 0);
        for (;;) {
            tag.clear();
            for (int d : digits) tag.push_back(alphabet[d]);
            std::string &slot_tag = tags_[static_cast<size_t>(key_slot(tag))];
            if (slot_tag.empty()) {
                slot_tag = tag;
                if (--missing == 0) return;
            }
            int i = len - 1;
            while (i >= 0 && ++digits[static_cast<size_t>(i)] == n)
                digits[static_cast<size_t>(i--)] = 0;
            if (i < 0) break;
        }
    }
}

const SlotTags &SlotTags::instance() {
    static const SlotTags table;
    return table;
}

}  // namespace keywatch
