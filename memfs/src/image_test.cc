// VersionImage (image.h) over a small store in a plain buffer: a version's
// image as extents of the mapping (adjacent blocks merged, bytes in image
// order) and the verification of its CRCs.
#include "image.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "versions_test_util.h"

namespace dlckpt::memfs {
namespace {

using namespace layout;  // NOLINT(google-build-using-namespace)

class VersionImageTest : public ::testing::Test, protected testing::SmallStore {
 protected:
  VersionImageTest() { images.SetGeometry(geo); }

  // Commits the files as acknowledged epoch `epoch` and parses it back.
  Version Commit(uint64_t epoch) {
    versions->Freeze(versions->FreeSlot(), epoch, nullptr, kRefAcked, files);
    auto v = versions->Committed(epoch);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : Version{};
  }

  // Uncompressed versions have no LZ4 block: decompressing is an error.
  static Status NoDecompress(const uint32_t*, uint64_t, uint8_t*, uint64_t, const std::string& what) {
    ADD_FAILURE() << "decompress called for " << what;
    return Status::Corruption(what);
  }

  VersionImage images{"t", &blocks};
};

TEST_F(VersionImageTest, ExtentsAreTheMetadataThenTheFilesBytesInEntryOrder) {
  AddFile("/b", 1, 0xbb);
  AddFile("/a", 2, 0xaa);  // blocks 1 and 2: adjacent, one extent
  Version v = Commit(1);
  auto img = images.Extents(v);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->epoch, 1u);
  const uint64_t meta = sizeof(ImageHeader) + 2 * sizeof(FileEntry);
  EXPECT_EQ(v.hdr->meta_bytes, meta);
  EXPECT_EQ(img->size, meta + 3 * kBs);
  ASSERT_EQ(img->extents.size(), 3u);
  EXPECT_EQ(img->extents[0].data, reinterpret_cast<const uint8_t*>(v.hdr));
  EXPECT_EQ(img->extents[0].len, meta);
  EXPECT_EQ(img->extents[1].data, blocks.Ptr(1));  // /a first: entries are in path order
  EXPECT_EQ(img->extents[1].len, 2 * kBs);
  EXPECT_EQ(img->extents[2].data, blocks.Ptr(0));

  std::vector<uint8_t> bytes(img->size);
  CopyFromImage(*img, 0, bytes.data(), bytes.size());
  ImageHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  EXPECT_EQ(h.nfiles, 2u);
  EXPECT_EQ(bytes[meta], 0xaa);
  EXPECT_EQ(bytes[meta + 2 * kBs - 1], 0xaa);
  EXPECT_EQ(bytes[meta + 2 * kBs], 0xbb);
}

TEST_F(VersionImageTest, AnEmptyVersionIsItsMetadata) {
  Version v = Commit(4);
  auto img = images.Extents(v);
  ASSERT_TRUE(img.ok());
  EXPECT_EQ(img->size, sizeof(ImageHeader));
  EXPECT_EQ(img->extents.size(), 1u);
}

TEST_F(VersionImageTest, VerifyRecomputesTheFilesCrcs) {
  NodePtr a = AddFile("/a", 2, 0x11);
  AddFile("/b", 1, 0x22);
  Version v = Commit(1);
  EXPECT_TRUE(images.Verify(v, NoDecompress).ok());

  blocks.Ptr(a->blocks[1])[7] ^= 1;
  Status s = images.Verify(v, NoDecompress);
  EXPECT_EQ(s.code(), EBADMSG);
  EXPECT_NE(s.message().find("store t epoch 1: /a: checksum mismatch"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace dlckpt::memfs
