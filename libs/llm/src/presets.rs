//! The prompts of NeMo Curator's generation stages, word for word (NeMo Curator,
//! `nemo_curator/stages/synthetic/nemotron_cc/prompts.py`, the multilingual QA tutorial and
//! `nemo_curator/stages/video/caption/`; Apache-2.0, © NVIDIA): a pipeline that names a
//! preset sends what NeMo sends. `{document}`
//! stands for the document's text (the stage's `input_field`), `{language}` for a language of
//! the stage's `languages`.

/// One of NeMo Curator's generation tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// `WikipediaParaphrasingStage`: the text rewritten in Wikipedia's style.
    WikipediaParaphrase,
    /// `DiverseQAStage`: up to 8 questions about the text, with answers.
    DiverseQa,
    /// `DistillStage`: a condensed paraphrase.
    Distill,
    /// `ExtractKnowledgeStage`: the text's knowledge rewritten as textbook passages.
    ExtractKnowledge,
    /// `KnowledgeListStage`: the text's facts as a list.
    KnowledgeList,
    /// `QAMultilingualSyntheticStage` with its tutorial's prompt: a short science question and
    /// answer in a language, tagged `[XX]`.
    MultilingualQa,
    /// `CaptionEnhancementStage`: a video caption made longer and more colourful by a text model.
    CaptionEnhancement,
    /// The same with its `av-surveillance` prompt (dashboard and surveillance cameras).
    CaptionEnhancementAvSurveillance,
}

/// The names a pipeline uses, in the docs' order.
pub const NAMES: [&str; 8] = [
    "wikipedia_paraphrase",
    "diverse_qa",
    "distill",
    "extract_knowledge",
    "knowledge_list",
    "multilingual_qa",
    "caption_enhancement",
    "caption_enhancement_av_surveillance",
];

const SYSTEM: &str = "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite answers to the questions.";

const DISTILL_SYSTEM: &str = "You are an artificial intelligence assistant. You carefully provide accurate, factual, thoughtful, nuanced answers, and are brilliant at reasoning.";

const WIKIPEDIA: &str = "For the following paragraph give me a diverse paraphrase of the same in high quality English language as in sentences on Wikipedia. Begin your answer on a separate line with \"Here is a paraphrased version:\".

Text: {document}";

const DIVERSE_QA: &str = "Task:
Read the text, ask questions and answer them.

Follow these instructions:
1. Ask diverse questions that require different cognitive skills or cover different aspects of the text.
2. Ask questions in various forms such as:
  - Yes/No questions that require determining whether a statement is true or false.
  - Open-ended questions that begin with words like what, how, when, where, why and who.
  - Multi-choice questions that offers two or more options to choose from. Include the options in the question.
  - Comparison questions that compare two quantities or objects and determine the relationship between them.
  - Reading comprehension questions that test the ability to understand and analyze the text.
  - Problem-solving questions that test the ability to solve mathematical, physical, or logical problems.
3. Focus on asking questions about factual information, important knowledge, or concrete details in the text.
4. Write questions and answers using clear and concise language.
5. Use plain text. Do not use Markdown.
6. Each question and answer pair should be on a separate line. Tag the question with \"Question:\" and the answer with \"Answer:\".

Text:
{document}

Task:
After reading the above text, ask up to 8 questions and provide the correct answers following the instructions. Give your response in this format:

Here are the questions and answers based on the provided text:
- Question: [first question] Answer: [first answer]
- Question: [second question] Answer: [second answer]
....";

const DISTILL: &str = "Your task is to read and paraphrase the provided text following these instructions:
- Aim to create a condensed but accurate and informative version of the original text, not a simplistic summary.
- Capture and preserve the crucial information, key concepts, important values, factual details in the original text, while making it more readable and accessible.
- Retain technical terms, specialized vocabulary, and complex concepts.
- Retain examples, explanations of reasoning processes, and supporting evidence to maintain the text's depth and context.
- Only include information that is present in the original text. Do not adding new or unsubstantiated claims.
- Write the text in plain text without formatting.

Here is the text:
{document}

Task:
After thoroughly reading the above text, paraphrase it in high-quality and clear English following the instructions. Begin your response with \"Paraphrased Text:\".";

const EXTRACT_KNOWLEDGE: &str = "Your task is to rewrite knowledge from the provided text following these instructions.
- Rewrite the text as a passage or passages using easy-to-understand and high-quality English like sentences in textbooks and Wikipedia.
- Focus on content in disciplines such as humanities, social sciences, natural sciences, technology, engineering, math, law and legal, business, management, art, education, agricultural sciences, politics, and history.
- Disregard content that does not contain useful facts or knowledge.
- Retain examples, explanations of reasoning processes, and supporting evidence to maintain the text's depth and context.
- Do not add or alter details. Only restate what is already in the text.
- Write in plain text.
- Do not add titles, subtitles, note, or comment.

Text:
{document}

Task:
Rewrite facts and knowledge from the above text as a passage or passages following the instructions.";

const KNOWLEDGE_LIST: &str = "Review the text and extract the key information. Follow these instructions:
- Carefully read the above text and provide a concise and organized list of factual information, concrete details, key concepts, and important numbers and statistics extracted from the text.
- Ensure each point is clear, specific, and supported by the original text.
- Ensure the extract text is information-dense and easier to learn from.
- Do not add titles or headings.

Text:
{document}

Task:
Extract the factual information, concrete details, and key concepts from the above text following the instructions.";

const MULTILINGUAL_QA: &str = "
    Generate a short question and a short answer in the general science domain in the language {language}.
    Begin with the language name using the 2-letter code, which is in square brackets, e.g. [EN] for English, [FR] for French, [DE] for German, [ES] for Spanish, [IT] for Italian.
    ";

const ENHANCE: &str = "
        You are a chatbot that enhances video caption inputs, adding more color and details to the text.
        The output should be longer than the provided input caption.
    ";

const ENHANCE_AV_SURVEILLANCE: &str = "
        You are a chatbot that enhances video captions from vehicle dashboard cameras or surveillance cameras.
        Add more details and generate a summary from the original text.
        The output should be longer than the provided input caption.
    ";

/// `CaptionPreparationStage`'s prompts for a video window, by `prompt_variant`.
pub const CAPTION_PROMPTS: [(&str, &str); 3] = [
    (
        "default",
        "
        Elaborate on the visual and narrative elements of the video in detail.
    ",
    ),
    (
        "av",
        "
        The video depicts the view from a camera mounted on a car as it is driving.
        Pay special attention to the motion of the cars, including the primary car
        whose point-of-view we observe in the video. Also note important factors
        that would relate to driving safety like the relative positions of pedestrians,
        lane markers, road signs, traffic signals, and any aggressive driving behavior
        of other vehicles. Also pay attention to interesting landmarks and describe
        them in detail.
    ",
    ),
    (
        "av-surveillance",
        "
        The video depicts the view from a surveillance camera. Pay special attention
        to the motion of the cars and other important factors that would relate to
        driving safety like the relative positions of pedestrians, lane markers,
        road signs, traffic signals, and any aggressive driving behavior of vehicles.
        Also pay attention to interesting landmarks and describe them in detail.
    ",
    ),
];

/// The caption prompt of `variant` (`default`, `av`, `av-surveillance`).
pub fn caption_prompt(variant: &str) -> Option<&'static str> {
    CAPTION_PROMPTS.iter().find(|(name, _)| *name == variant).map(|(_, text)| *text)
}

impl Preset {
    pub fn parse(name: &str) -> Option<Preset> {
        Some(match name {
            "wikipedia_paraphrase" => Preset::WikipediaParaphrase,
            "diverse_qa" => Preset::DiverseQa,
            "distill" => Preset::Distill,
            "extract_knowledge" => Preset::ExtractKnowledge,
            "knowledge_list" => Preset::KnowledgeList,
            "multilingual_qa" => Preset::MultilingualQa,
            "caption_enhancement" => Preset::CaptionEnhancement,
            "caption_enhancement_av_surveillance" => Preset::CaptionEnhancementAvSurveillance,
            _ => return None,
        })
    }

    /// The system message NeMo sends (the Wikipedia, distill and enhancement tasks have one).
    pub fn system(self) -> Option<&'static str> {
        match self {
            Preset::WikipediaParaphrase => Some(SYSTEM),
            Preset::Distill => Some(DISTILL_SYSTEM),
            Preset::CaptionEnhancement => Some(ENHANCE),
            Preset::CaptionEnhancementAvSurveillance => Some(ENHANCE_AV_SURVEILLANCE),
            _ => None,
        }
    }

    /// The user message with `{document}` (and `{language}`) in it, as NeMo writes it.
    pub fn user(self) -> &'static str {
        match self {
            Preset::WikipediaParaphrase => WIKIPEDIA,
            Preset::DiverseQa => DIVERSE_QA,
            Preset::Distill => DISTILL,
            Preset::ExtractKnowledge => EXTRACT_KNOWLEDGE,
            Preset::KnowledgeList => KNOWLEDGE_LIST,
            Preset::MultilingualQa => MULTILINGUAL_QA,
            // The caption itself is the user's message.
            Preset::CaptionEnhancement | Preset::CaptionEnhancementAvSurveillance => "{document}",
        }
    }

    /// The user message as one of our templates: `{document}` becomes the field
    /// `input_field`, the rest's braces are literal.
    pub fn template(self, input_field: &str) -> String {
        let escaped = self.user().replace('{', "{{").replace('}', "}}");
        escaped.replace("{{document}}", &format!("{{{input_field}}}")).replace("{{language}}", "{language}")
    }

    /// The field NeMo writes the answer to.
    pub fn output_field(self) -> &'static str {
        match self {
            Preset::WikipediaParaphrase => "rephrased",
            Preset::DiverseQa => "diverse_qa",
            Preset::Distill => "distill",
            Preset::ExtractKnowledge => "extract_knowledge",
            Preset::KnowledgeList => "knowledge_list",
            Preset::MultilingualQa => "text",
            Preset::CaptionEnhancement | Preset::CaptionEnhancementAvSurveillance => "enhanced_caption",
        }
    }

    /// NeMo's own clean-up of an answer inside the generation stage: the multilingual QA stage
    /// drops every `*` (models bold their answers).
    pub fn clean<'a>(self, answer: &'a str) -> std::borrow::Cow<'a, str> {
        match self {
            Preset::MultilingualQa if answer.contains('*') => std::borrow::Cow::Owned(answer.replace('*', "")),
            _ => std::borrow::Cow::Borrowed(answer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Template;

    #[test]
    fn every_preset_parses_and_names_the_input_field() {
        for name in NAMES {
            let p = Preset::parse(name).unwrap();
            let t = Template::parse(&p.template("segment")).unwrap();
            let want: &[&str] = if p == Preset::MultilingualQa { &["language"] } else { &["segment"] };
            assert_eq!(t.fields(), want, "{name}");
            // Rendered, the template is NeMo's text with the field filled in.
            let rendered = t.render(|f| if f == "segment" { "THE TEXT" } else { "French" });
            assert_eq!(rendered, p.user().replace("{document}", "THE TEXT").replace("{language}", "French"), "{name}");
        }
        assert_eq!(Preset::parse("summary"), None);
    }

    #[test]
    fn caption_prompts_are_nemos_by_variant() {
        assert!(caption_prompt("default").unwrap().trim().starts_with("Elaborate on the visual"));
        assert!(caption_prompt("av").unwrap().contains("camera mounted on a car"));
        assert!(caption_prompt("av-surveillance").unwrap().contains("surveillance camera"));
        assert_eq!(caption_prompt("summary"), None);
        let p = Preset::parse("caption_enhancement").unwrap();
        assert_eq!(p.template("caption"), "{caption}");
        assert!(p.system().unwrap().contains("enhances video caption inputs"));
    }

    #[test]
    fn only_the_multilingual_answers_lose_their_stars() {
        assert_eq!(Preset::MultilingualQa.clean("[FR] **Q**: a?"), "[FR] Q: a?");
        assert_eq!(Preset::DiverseQa.clean("**Q**"), "**Q**");
    }
}
