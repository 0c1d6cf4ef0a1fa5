// Vision preprocessing (vision/preprocess.h, image_decode.h, image_span.h): the §8 size rules on
// hand-checked sizes, patch layout, PNG/JPEG decoding round trips and errors for bad bytes.
#include <gtest/gtest.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "tensor/number_formats.h"
#include "test_png.h"
#include "vision/image_decode.h"
#include "vision/image_resize.h"
#include "vision/image_span.h"
#include "vision/preprocess.h"

namespace deepinfer::vision {
namespace {

// tiny-v41's vision_config (model_v41_flash.md §13) and the released one (§1).
loader::VisionConfig tiny() { return loader::VisionConfig{2, 64, 2, 128, 14, 10000.0, 3, 32, 7056, 0.0}; }
loader::VisionConfig flash() { return loader::VisionConfig{32, 1024, 16, 2816, 14, 10000.0, 3, 1024, 295936, 0.0}; }

void expect_layout(const ImageLayout& l, int64_t cw, int64_t ch, int64_t gw, int64_t gh, int64_t nw, int64_t nh) {
  EXPECT_EQ(l.content_w, cw);
  EXPECT_EQ(l.content_h, ch);
  EXPECT_EQ(l.grid_w, gw);
  EXPECT_EQ(l.grid_h, gh);
  EXPECT_EQ(l.canvas_w, gw * 14);
  EXPECT_EQ(l.canvas_h, gh * 14);
  EXPECT_EQ(l.n_llm_w, nw);
  EXPECT_EQ(l.n_llm_h, nh);
}

TEST(VisionSize, SmallImageIsUpscaledToMinPixels) {
  // 20x10, area 200 < 7056: scale sqrt(35.28) = 5.9397 -> 119 x 60 (ceil); grid 9 x 5; cells 3 x 2.
  auto l = plan_image_size(20, 10, tiny());
  ASSERT_TRUE(l.is_ok()) << l.status().to_string();
  expect_layout(*l, 119, 60, 9, 5, 3, 2);
  EXPECT_EQ(l->span_len(), 2 * (3 + 1) + 2);
  // 100x100 under the released config: scale 5.44 -> 544 x 544, grid 39 (38.9 rounded up), cells 13.
  auto f = plan_image_size(100, 100, flash());
  ASSERT_TRUE(f.is_ok());
  expect_layout(*f, 544, 544, 39, 39, 13, 13);
  // Exactly min_pixels stays as it is: 84 x 84 = 7056 -> grid 6 x 6, cells 2 x 2, span 8.
  auto e = plan_image_size(84, 84, tiny());
  ASSERT_TRUE(e.is_ok());
  expect_layout(*e, 84, 84, 6, 6, 2, 2);
  EXPECT_EQ(e->span_len(), 8);
}

TEST(VisionSize, SquareImageCapsAt31x31UnderTheReleasedBudget) {
  // 31 * 32 + 2 = 994 <= 1024 < 32 * 33 + 2: the content shrinks to 31 cells of 42 px = 1302.
  for (int64_t side : {1400, 2000, 4000}) {
    auto l = plan_image_size(side, side, flash());
    ASSERT_TRUE(l.is_ok());
    expect_layout(*l, 1302, 1302, 93, 93, 31, 31);
    EXPECT_EQ(l->span_len(), 994);
  }
  // Already under the cap: 1302 itself, and 1000 (grid 72, cells 24) are not shrunk.
  auto k = plan_image_size(1000, 1000, flash());
  ASSERT_TRUE(k.is_ok());
  expect_layout(*k, 1000, 1000, 72, 72, 24, 24);
}

TEST(VisionSize, WideImageShrinksWithItsAspect) {
  // 1000x100 under tiny (32 tokens): the long side steps down one 42-px cell at a time, the short
  // side = floor(100 * w / 1000). 14 cells: 588 x 58 -> grid 42 x 5, cells 14 x 2, span 2*15+2 = 32
  // (15 cells: 630 x 63 -> 2 * 16 + 2 = 34 > 32).
  auto l = plan_image_size(1000, 100, tiny());
  ASSERT_TRUE(l.is_ok());
  expect_layout(*l, 588, 58, 42, 5, 14, 2);
  EXPECT_EQ(l->span_len(), 32);
  // Tall images shrink on their long side too, but the newline per row makes the span
  // asymmetric: 11 cells (462 x 46: cells 2 wide) give 11 * 3 + 2 = 35 > 32; 10 cells (420 x 42,
  // grid 3 x 30, cells 1 x 10) give 10 * 2 + 2 = 22.
  auto t = plan_image_size(100, 1000, tiny());
  ASSERT_TRUE(t.is_ok());
  expect_layout(*t, 42, 420, 3, 30, 1, 10);
  EXPECT_EQ(t->span_len(), 22);
}

TEST(VisionSize, WideClampSqueezesTheWidth) {
  loader::VisionConfig c = tiny();
  c.max_wh_ratio = 2.0;
  // 400x100: width clamped to 200 (area 20000 >= 7056): grid 15 x 8, cells 5 x 3 -> 3*6+2 = 20.
  auto l = plan_image_size(400, 100, c);
  ASSERT_TRUE(l.is_ok());
  expect_layout(*l, 200, 100, 15, 8, 5, 3);
}

TEST(VisionSize, Errors) {
  EXPECT_FALSE(plan_image_size(0, 10, tiny()).is_ok());
  EXPECT_FALSE(plan_image_size(10, -1, tiny()).is_ok());
  EXPECT_FALSE(plan_image_size(10, 10, loader::VisionConfig{}).is_ok());
  EXPECT_FALSE(plan_image_size(int64_t{1} << 40, 10, tiny()).is_ok());
  // A very long strip still plans quickly (sizes over max_image_tokens cells are skipped) and
  // fits: 1 x 2^30 -> 15 cells of 42 px tall, one wide: 15 * 2 + 2 = 32 tokens.
  auto strip = plan_image_size(1, kMaxImageSide, tiny());
  ASSERT_TRUE(strip.is_ok());
  expect_layout(*strip, 1, 630, 1, 45, 1, 15);
  loader::VisionConfig c = tiny();
  c.max_image_tokens = 3;
  auto r = plan_image_size(10, 10, c);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("max_image_tokens"), std::string::npos) << r.status().to_string();
}

RgbImage pattern(int64_t w, int64_t h) {
  RgbImage img{w, h, std::vector<uint8_t>(static_cast<size_t>(w * h * 3))};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) img.rgb[(y * w + x) * 3 + c] = static_cast<uint8_t>((x * 7 + y * 13 + c * 50) % 256);
  return img;
}

float norm_px(int v) { return tensor::round_bf16((v / 255.0f - 0.5f) / 0.5f); }

TEST(VisionPatches, ChannelMajorPatchesInRowMajorGridOrder) {
  // 84 x 90 (area >= 7056, no resize): canvas 84 x 98, grid 7 rows x 6 columns; rows 90..97 gray.
  const RgbImage img = pattern(84, 90);
  auto p = prepare_image(img, tiny());
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  ASSERT_EQ(p->layout.grid_w, 6);
  ASSERT_EQ(p->layout.grid_h, 7);
  ASSERT_EQ(p->patch_dim, 588);
  ASSERT_EQ(p->patches.size(), 42u * 588u);
  for (int64_t gy = 0; gy < 7; ++gy)
    for (int64_t gx = 0; gx < 6; ++gx)
      for (int c = 0; c < 3; ++c)
        for (int64_t y = 0; y < 14; ++y)
          for (int64_t x = 0; x < 14; ++x) {
            const int64_t py = gy * 14 + y, px = gx * 14 + x;
            const int v = py < 90 ? img.at(py, px, c) : 127;
            ASSERT_EQ(p->patches[(gy * 6 + gx) * 588 + c * 196 + y * 14 + x], norm_px(v))
                << "patch (" << gy << "," << gx << ") c " << c << " y " << y << " x " << x;
          }
  EXPECT_EQ(norm_px(255), 1.0f);
  EXPECT_EQ(norm_px(0), -1.0f);
}

TEST(VisionPatches, ResizedContentKeepsFlatColours) {
  // A flat colour survives the bicubic upscale exactly (normalised weights), and the padding is gray.
  RgbImage img{20, 10, std::vector<uint8_t>(600)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>(i % 3 == 0 ? 200 : 30);
  auto p = prepare_image(img, tiny());
  ASSERT_TRUE(p.is_ok());
  // content 119 x 60, canvas 126 x 70: patch (0, 0) is all content, patch (4, 8) holds padding.
  EXPECT_EQ(p->patches[0], norm_px(200));
  EXPECT_EQ(p->patches[196], norm_px(30));
  const int64_t last = (4 * 9 + 8) * 588;
  EXPECT_EQ(p->patches[last + 13 * 14 + 13], norm_px(127));  // (69, 125): outside 60 x 119
}

TEST(VisionResize, BicubicReproducesRampsWithAlignedCentres) {
  // The cubic kernel (a = -0.5) reproduces linear ramps away from the borders; output pixel i
  // samples input position (i + 0.5) * scale - 0.5 (centres aligned, as PIL does).
  RgbImage ramp{40, 3, std::vector<uint8_t>(40 * 3 * 3)};
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 40; ++x)
      for (int c = 0; c < 3; ++c) ramp.rgb[(y * 40 + x) * 3 + c] = static_cast<uint8_t>(5 * x + c);
  const RgbImage up = resize_bicubic(ramp, 80, 3);  // scale 1/2: position i/2 - 0.25
  for (int64_t i = 6; i < 74; ++i) ASSERT_NEAR(up.at(1, i, 0), 5.0 * (i / 2.0 - 0.25), 0.51) << "upscaled " << i;
  const RgbImage down = resize_bicubic(ramp, 10, 3);  // scale 4 (kernel widened): position 4i + 1.5
  for (int64_t i = 2; i < 8; ++i) ASSERT_NEAR(down.at(1, i, 2), 5.0 * (4 * i + 1.5) + 2, 0.51) << "downscaled " << i;
  // Shrinking averages over the scale (antialiasing): period-4 stripes [255, 0, 0, 0] shrunk 4x
  // come out near their mean 64, where an unwidened kernel would sample near the zeros.
  RgbImage stripes{40, 3, std::vector<uint8_t>(40 * 3 * 3)};
  for (int64_t i = 0; i < 40 * 3; ++i)
    for (int c = 0; c < 3; ++c) stripes.rgb[i * 3 + c] = (i % 40) % 4 == 0 ? 255 : 0;
  const RgbImage avg = resize_bicubic(stripes, 10, 3);
  for (int64_t i = 2; i < 8; ++i) ASSERT_NEAR(avg.at(1, i, 0), 64, 8) << "shrunk stripes " << i;
  const RgbImage same = resize_bicubic(ramp, 40, 3);
  EXPECT_EQ(same.rgb, ramp.rgb);
}

std::vector<uint8_t> write_png(const RgbImage& img) {
  const std::string png = deepinfer::testing::encode_png_rgb(img.width, img.height, img.rgb.data());
  EXPECT_FALSE(png.empty());
  return std::vector<uint8_t>(png.begin(), png.end());
}

std::vector<uint8_t> write_jpeg(const RgbImage& img) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(img.width);
  c.image_height = static_cast<JDIMENSION>(img.height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(img.rgb.data()) + c.next_scanline * img.width * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

TEST(VisionDecode, PngRoundTripIsExact) {
  const RgbImage img = pattern(37, 23);
  auto d = decode_image(write_png(img));
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->width, 37);
  EXPECT_EQ(d->height, 23);
  EXPECT_EQ(d->rgb, img.rgb);
}

TEST(VisionDecode, BytesToPatchesIsDecodeThenPrepare) {
  const RgbImage img = pattern(30, 20);  // upscaled to 103 x 69 under tiny
  auto from_bytes = prepare_image_bytes(write_png(img), tiny());
  auto direct = prepare_image(img, tiny());
  ASSERT_TRUE(from_bytes.is_ok() && direct.is_ok());
  EXPECT_EQ(from_bytes->layout.content_w, 103);
  EXPECT_EQ(from_bytes->layout.content_h, 69);
  EXPECT_EQ(from_bytes->patches, direct->patches);
}

TEST(VisionDecode, PngAlphaIsDroppedNotComposited) {
  // RGBA with alpha 0 everywhere: the colour channels come back as written.
  const RgbImage img = pattern(9, 5);
  std::vector<uint8_t> rgba(9 * 5 * 4);
  for (size_t i = 0; i < 45; ++i) {
    for (int c = 0; c < 3; ++c) rgba[i * 4 + c] = img.rgb[i * 3 + c];
    rgba[i * 4 + 3] = 0;
  }
  png_image p;
  std::memset(&p, 0, sizeof(p));
  p.version = PNG_IMAGE_VERSION;
  p.width = 9;
  p.height = 5;
  p.format = PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  ASSERT_TRUE(png_image_write_get_memory_size(p, size, 0, rgba.data(), 0, nullptr));
  std::vector<uint8_t> bytes(size);
  ASSERT_TRUE(png_image_write_to_memory(&p, bytes.data(), &size, 0, rgba.data(), 0, nullptr));
  bytes.resize(size);
  auto d = decode_image(bytes);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->rgb, img.rgb);
}

TEST(VisionDecode, JpegRoundTripIsClose) {
  // A smooth image at quality 100: within a few code values of the source.
  RgbImage img{40, 24, std::vector<uint8_t>(40 * 24 * 3)};
  for (int64_t y = 0; y < 24; ++y)
    for (int64_t x = 0; x < 40; ++x)
      for (int c = 0; c < 3; ++c) img.rgb[(y * 40 + x) * 3 + c] = static_cast<uint8_t>(40 + x * 3 + y * 2 + c * 20);
  auto d = decode_image(write_jpeg(img));
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  ASSERT_EQ(d->width, 40);
  ASSERT_EQ(d->height, 24);
  for (size_t i = 0; i < img.rgb.size(); ++i) ASSERT_NEAR(d->rgb[i], img.rgb[i], 6) << "byte " << i;
}

void expect_error(std::span<const uint8_t> bytes, const std::string& words) {
  auto d = decode_image(bytes);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().to_string().find(words), std::string::npos) << d.status().to_string();
  EXPECT_FALSE(prepare_image_bytes(bytes, tiny()).is_ok());
}

TEST(VisionDecode, BadBytesAreErrors) {
  expect_error({}, "empty");
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  expect_error(text, "not recognised");
  std::vector<uint8_t> png = write_png(pattern(16, 16));
  std::vector<uint8_t> cut(png.begin(), png.begin() + 40);  // header, then nothing
  expect_error(cut, "PNG");
  for (size_t i = 60; i < png.size(); ++i) png[i] ^= 0x5a;  // corrupt compressed data / CRCs
  expect_error(png, "PNG");
  std::vector<uint8_t> jpeg = {0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0, 1, 2, 3};
  expect_error(jpeg, "JPEG");
  // A valid JPEG cut in half: libjpeg would fill the rest with gray; we refuse it.
  const std::vector<uint8_t> full = write_jpeg(pattern(64, 48));
  ASSERT_TRUE(decode_image(full).is_ok());
  const std::vector<uint8_t> half(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(full.size() / 2));
  expect_error(half, "truncated");
}

TEST(VisionDecode, HugeImageIsRefusedFromItsHeader) {
  // A 20000 x 20000 PNG header (4e8 pixels > kMaxDecodedPixels): refused before decoding pixels.
  std::vector<uint8_t> png = write_png(pattern(16, 16));
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) png[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  };
  put32(16, 20000);
  put32(20, 20000);
  put32(29, static_cast<uint32_t>(crc32(0, &png[12], 17)));  // IHDR type + data
  expect_error(png, "too large");
}

TEST(VisionSpan, SlotsAndAlignerRows) {
  const std::vector<SpanSlot> s = span_tokens(2, 3);
  ASSERT_EQ(static_cast<int64_t>(s.size()), span_length(2, 3));
  ASSERT_EQ(s.size(), 10u);
  using enum SpanSlot;
  EXPECT_EQ(s, (std::vector<SpanSlot>{kStart, kImage, kImage, kImage, kNewline, kImage, kImage, kImage, kNewline,
                                      kEnd}));
  EXPECT_EQ(span_aligner_rows(2, 3), (std::vector<int64_t>{-1, 0, 1, 2, -1, 3, 4, 5, -1, -1}));
  EXPECT_TRUE(span_tokens(0, 3).empty());
  EXPECT_EQ(span_length(31, 31), 994);
}

}  // namespace
}  // namespace deepinfer::vision
