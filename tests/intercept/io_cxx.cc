// io_cxx: writes a checkpoint under BASE with C++ streams (ofstream,
// ifstream, fstream, text and binary, seekp/tellp, append) and
// std::filesystem, reads it back and checks it; exits 0 when every check
// passed. Run under a dlckpt prefix and on disk; the test compares the trees.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

int checks = 0;
std::string base;

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    ++checks;                                                                                \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "io_cxx: %s:%d: check failed: %s (errno %d %s)\n", __FILE__,       \
                   __LINE__, #cond, errno, std::strerror(errno));                            \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

std::string P(const std::string& name) { return base + "/" + name; }

void TextStreams() {
  {
    std::ofstream out(P("state.txt"));
    CHECK(out.is_open());
    out << "step " << 42 << "\n";
    for (int i = 0; i < 500; ++i) out << i << ' ' << i * 0.25 << ' ' << "cell" << i << '\n';
    out << "end" << std::endl;
    CHECK(out.good());
  }
  std::ifstream in(P("state.txt"));
  CHECK(in.is_open());
  std::string word;
  int step = 0;
  in >> word >> step;
  CHECK(word == "step" && step == 42);
  for (int i = 0; i < 500; ++i) {
    int k;
    double v;
    std::string name;
    in >> k >> v >> name;
    CHECK(k == i && v == i * 0.25 && name == "cell" + std::to_string(i));
  }
  in >> word;
  CHECK(word == "end");
  CHECK(!(in >> word) && in.eof());
  in.clear();
  in.seekg(0);
  std::string first;
  CHECK(std::getline(in, first) && first == "step 42");
  CHECK(in.tellg() == std::streampos(8));
}

void BinaryStreams() {
  std::vector<double> field(3 << 17);  // 3 MiB: large writes take filebuf's writev path
  std::iota(field.begin(), field.end(), 0.5);
  {
    std::ofstream out(P("field.bin"), std::ios::binary | std::ios::trunc);
    CHECK(out.is_open());
    uint64_t n = field.size();
    out.write(reinterpret_cast<const char*>(&n), sizeof n);
    out.write(reinterpret_cast<const char*>(field.data()), field.size() * sizeof(double));
    CHECK(out.tellp() == std::streampos(sizeof n + field.size() * sizeof(double)));
    out.seekp(0);
    uint64_t marked = n | (1ull << 63);
    out.write(reinterpret_cast<const char*>(&marked), sizeof marked);
    out.close();
    CHECK(!out.fail());
  }
  std::ifstream in(P("field.bin"), std::ios::binary);
  CHECK(in.is_open());
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), sizeof n);
  CHECK(n == (field.size() | (1ull << 63)));
  std::vector<double> back(field.size());
  in.read(reinterpret_cast<char*>(back.data()), back.size() * sizeof(double));
  CHECK(in.gcount() == static_cast<std::streamsize>(back.size() * sizeof(double)));
  CHECK(back == field);
  in.seekg(8 + 100 * sizeof(double));
  double one = 0;
  in.read(reinterpret_cast<char*>(&one), sizeof one);
  CHECK(one == 100.5);
  in.seekg(-static_cast<std::streamoff>(sizeof(double)), std::ios::end);
  in.read(reinterpret_cast<char*>(&one), sizeof one);
  CHECK(one == field.back());
  CHECK(in.rdbuf()->in_avail() == 0);
}

void ReadWriteAndAppend() {
  {
    std::ofstream out(P("log.txt"));
    out << "first\n";
  }
  {
    std::ofstream out(P("log.txt"), std::ios::app);
    CHECK(out.is_open());
    out << "second\n";
  }
  {
    std::fstream io(P("log.txt"), std::ios::in | std::ios::out);
    CHECK(io.is_open());
    std::string line;
    CHECK(std::getline(io, line) && line == "first");
    io.seekp(0);
    io << "FIRST";
    io.seekg(0, std::ios::end);
    CHECK(io.tellg() == std::streampos(13));
  }
  std::ifstream in(P("log.txt"));
  std::stringstream all;
  all << in.rdbuf();
  CHECK(all.str() == "FIRST\nsecond\n");
}

void Filesystem() {
  fs::path dir = fs::path(base) / "fs" / "a" / "b";
  CHECK(fs::create_directories(dir));
  CHECK(fs::is_directory(dir));
  { std::ofstream(dir / "x.txt") << "filesystem\n"; }
  CHECK(fs::exists(dir / "x.txt"));
  CHECK(fs::file_size(dir / "x.txt") == 11);
  fs::copy_file(dir / "x.txt", dir / "y.txt");
  CHECK(fs::file_size(dir / "y.txt") == 11);
  fs::rename(dir / "y.txt", dir / "z.txt");
  CHECK(!fs::exists(dir / "y.txt") && fs::exists(dir / "z.txt"));
  { std::ofstream(dir / "tmp.txt") << "gone"; }
  CHECK(fs::remove(dir / "tmp.txt"));
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  CHECK((names == std::set<std::string>{"x.txt", "z.txt"}));
  std::ifstream in(dir / "z.txt");
  std::string s;
  CHECK(std::getline(in, s) && s == "filesystem");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: io_cxx BASE\n");
    return 2;
  }
  base = argv[1];
  CHECK(mkdir(base.c_str(), 0755) == 0);
  TextStreams();
  BinaryStreams();
  ReadWriteAndAppend();
  Filesystem();
  // Destroyed (and flushed) by exit, before dlckpt detaches the store.
  static std::ofstream at_exit(P("at_exit.txt"));
  for (int i = 0; i < 100; ++i) at_exit << "flushed by the destructor " << i << '\n';
  std::cout << "io_cxx: " << checks << " checks passed in " << base << "\n";
  return 0;
}
