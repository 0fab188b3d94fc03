// The greedy-sampling case table.
#pragma once

namespace gossamer::kern {

struct ArgmaxCase {
  const char* name;
  int batch, vocab;
};

inline constexpr ArgmaxCase kArgmaxCases[] = {
    {"tiny b1 v10", 1, 10},
    {"gpt-oss b1 v201088", 1, 201088},
    {"b64 v201088", 64, 201088},
    {"odd b3 v4097", 3, 4097},
};

}  // namespace gossamer::kern
