// The plain default chat format and the template path.
#include "router/chat_format.h"

#include <gtest/gtest.h>

namespace tarmac::router {
namespace {

using Json = nlohmann::ordered_json;

TEST(ChatFormat, PlainDefault) {
  auto f = ChatFormatter::Create("", "<s>", "</s>");
  ASSERT_TRUE(f.ok());
  Json msgs = Json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},
                              {"role":"assistant","content":"Hello"},{"role":"user","content":"Who?"}])");
  EXPECT_EQ(*f->Render(msgs, nullptr, true), "Be brief.\n\nUser: Hi\nAssistant: Hello\nUser: Who?\nAssistant:");
  EXPECT_EQ(*f->Render(msgs, nullptr, false), "Be brief.\n\nUser: Hi\nAssistant: Hello\nUser: Who?\n");
  EXPECT_TRUE(f->encode_options().add_special);
}

TEST(ChatFormat, Template) {
  auto f = ChatFormatter::Create(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
      "<s>", "</s>");
  ASSERT_TRUE(f.ok()) << f.status().message();
  Json msgs = Json::parse(R"([{"role":"user","content":"Hi"}])");
  EXPECT_EQ(*f->Render(msgs, nullptr, true), "<s><user>Hi<assistant>");
  EXPECT_TRUE(f->encode_options().parse_special);
  EXPECT_FALSE(ChatFormatter::Create("{% for %}", "", "").ok());
}

}  // namespace
}  // namespace tarmac::router
