#include "common/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace gossamer {

Status write_npy_f32(const std::string& path, const float* data,
                     const std::vector<int64_t>& shape) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dict << shape[i] << (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
    if (i + 1 < shape.size()) dict << " ";
    n *= shape[i];
  }
  dict << "), }";
  std::string header = dict.str();
  const size_t prefix = 10;  // magic(6) + version(2) + header_len(2)
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return IoError("cannot open '" + path + "' for writing: " + std::strerror(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f, &std::fclose);
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint16_t hlen = static_cast<uint16_t>(header.size());
  const unsigned char hl[2] = {static_cast<unsigned char>(hlen & 0xff),
                               static_cast<unsigned char>(hlen >> 8)};
  if (std::fwrite(magic, 1, 8, f) != 8 || std::fwrite(hl, 1, 2, f) != 2 ||
      std::fwrite(header.data(), 1, header.size(), f) != header.size() ||
      std::fwrite(data, sizeof(float), static_cast<size_t>(n), f) != static_cast<size_t>(n)) {
    return IoError("short write to '" + path + "'");
  }
  return Status::Ok();
}

Result<NpyArrayF32> read_npy_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open '" + path + "'");
  char magic[10];
  if (!in.read(magic, 10) || std::memcmp(magic, "\x93NUMPY", 6) != 0 || magic[6] != 1) {
    return Corrupt("'" + path + "' is not a version-1 .npy file");
  }
  const size_t hlen =
      static_cast<unsigned char>(magic[8]) | (static_cast<unsigned char>(magic[9]) << 8);
  std::string header(hlen, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(hlen)))
    return Corrupt("'" + path + "': truncated header");
  if (header.find("'<f4'") == std::string::npos)
    return Unsupported("'" + path + "': only <f4 arrays supported");
  if (header.find("'fortran_order': False") == std::string::npos)
    return Unsupported("'" + path + "': fortran order");
  NpyArrayF32 arr;
  const size_t lp = header.find('('), rp = header.find(')');
  if (lp == std::string::npos || rp == std::string::npos)
    return Corrupt("'" + path + "': no shape");
  std::stringstream ss(header.substr(lp + 1, rp - lp - 1));
  std::string tok;
  int64_t n = 1;
  while (std::getline(ss, tok, ',')) {
    if (tok.find_first_not_of(' ') == std::string::npos) continue;
    arr.shape.push_back(std::stoll(tok));
    n *= arr.shape.back();
  }
  arr.data.resize(static_cast<size_t>(n));
  if (!in.read(reinterpret_cast<char*>(arr.data.data()), n * 4))
    return Corrupt("'" + path + "': truncated data");
  return arr;
}

}  // namespace gossamer
