// Redis Cluster key slots: CRC16/XMODEM of the key (or of its hash tag) mod 16384, and a
// table slot -> shortest hash tag that lands in that slot, so that a queue can live in the
// same slot as the keys it tracks. The table is computed the same way by every instance.
// Pure functions; SlotTags is immutable after construction: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace keywatch {

inline constexpr int kSlotCount = 16384;

// CRC16/XMODEM (poly 0x1021, init 0): CRC("123456789") = 0x31C3.
uint16_t crc16(std::string_view data);

// The part of a key Redis hashes: the text between the first '{' and the next '}' when
// that is not empty, else the whole key.
std::string_view hash_tag(std::string_view key);

// The cluster slot of a key.
int key_slot(std::string_view key);

class SlotTags {
  public:
    SlotTags();  // builds the table (a few milliseconds)
    // The tag (without braces) whose slot is `slot`.
    const std::string &tag(int slot) const { return tags_[static_cast<size_t>(slot)]; }
    // The tag for the slot of `key`.
    const std::string &tag_for_key(std::string_view key) const { return tag(key_slot(key)); }

    static const SlotTags &instance();

  private:
    std::vector<std::string> tags_;
};

}  // namespace keywatch
